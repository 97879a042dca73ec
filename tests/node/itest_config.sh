#!/bin/bash
# haspd refuses bad configurations with a message naming the field and exit
# code 2, and an unusable data directory with a message naming the path and
# exit code 3, before any interface is created (docs/OPERATIONS.md).
#   itest_config.sh <haspd> <source dir> <hasp-keygen>
set -u
haspd=$1
keygen=$3
tmp=$(mktemp -d /tmp/hasp-itest-config.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
# Each node's key pair (docs/SECURITY.md 3.5): the secret key file, and the
# public key that every member line carries.
"$keygen" "$tmp/n1.key" && "$keygen" "$tmp/n2.key" || { echo "FAIL: hasp-keygen"; exit 1; }
pub1=$("$keygen" --public "$tmp/n1.key") && pub2=$("$keygen" --public "$tmp/n2.key") ||
	{ echo "FAIL: hasp-keygen --public"; exit 1; }
printf '%s' "$pub1" | grep -Eqx '[0-9a-f]{64}' || { echo "FAIL: hasp-keygen --public printed '$pub1'"; exit 1; }
[ "$pub1" != "$pub2" ] || { echo "FAIL: two key files, one public key"; exit 1; }
"$keygen" --identity app --identities "$tmp/identities" --allow all: "$tmp/app.key" ||
	{ echo "FAIL: hasp-keygen --identity"; exit 1; }

base() { # a valid configuration, minus the keys named in $@
	local skip=" $* "
	for kv in "node_id=1" "cluster_id=9" "member=1,10.77.250.11,7001,7000,$pub1" \
		"member=2,10.77.250.12,7001,7000,$pub2" "ip=10.77.250.11/24" "mac=02:77:00:00:00:01" \
		"data_dir=$tmp/data" "eal=-l 0 --no-huge --no-pci --file-prefix hasp-itest-config" \
		"node_key_file=$tmp/n1.key" "client_identities_file=$tmp/identities"; do
		k=${kv%%=*}
		case $skip in *" $k "*) continue ;; esac
		echo "$k = ${kv#*=}"
	done
}

expect() { # code field description -- haspd arguments...
	local code=$1 field=$2 what=$3
	shift 4
	local out rc
	out=$("$haspd" "$@" 2>&1 </dev/null)
	rc=$?
	if [ $rc -ne "$code" ] || ! printf '%s' "$out" | grep -q -- "$field"; then
		echo "FAIL: $what: exit $rc (want $code), message: $out"
		fails=$((fails + 1))
	else
		echo "ok: $what -> exit $rc: $(printf '%s' "$out" | head -1)"
	fi
}

for key in node_id cluster_id member ip mac data_dir eal node_key_file client_identities_file; do
	base "$key" > "$tmp/c.conf"
	expect 2 "$key" "missing $key" -- --config "$tmp/c.conf"
done
base > "$tmp/ok.conf"
expect 2 node_id "node_id not a number" -- --config "$tmp/ok.conf" --node-id abc
expect 2 member "node_id not a member" -- --config "$tmp/ok.conf" --node-id 3
expect 2 mac "bad mac" -- --config "$tmp/ok.conf" --mac zz:00:00:00:00:01
expect 2 mac "multicast mac" -- --config "$tmp/ok.conf" --mac 03:00:00:00:00:01
expect 2 ip "bad ip" -- --config "$tmp/ok.conf" --ip 300.1.1.1/24
expect 2 ip "ip not this member's" -- --config "$tmp/ok.conf" --ip 10.77.250.99/24
expect 2 member "bad member" -- --config "$tmp/ok.conf" --member 3,10.77.250.13,7001
expect 2 member "duplicate member" -- --config "$tmp/ok.conf" --member 2,10.77.250.14,7001,7000
expect 2 idle "bad idle" -- --config "$tmp/ok.conf" --idle spin
expect 2 batch_max "batch_max 0" -- --config "$tmp/ok.conf" --batch-max 0
expect 2 heartbeat_ticks "heartbeat >= election" -- --config "$tmp/ok.conf" --heartbeat-ticks 20 --election-ticks 10
expect 2 snapshot_threshold "snapshot window" -- --config "$tmp/ok.conf" --log-window 128 --snapshot-threshold 100
expect 2 bogus "unknown key" -- --config "$tmp/ok.conf" --bogus 1
expect 2 "config" "missing file" -- --config "$tmp/none.conf"
printf 'node_id 1\n' > "$tmp/syntax.conf"
# Peer authentication (docs/SECURITY.md 3): the node's key file must be
# owner-only and exactly one key; turning it off takes an explicit line.
expect 2 peer_auth "bad peer_auth" -- --config "$tmp/ok.conf" --peer-auth maybe
cp "$tmp/n1.key" "$tmp/open.key"
chmod 0644 "$tmp/open.key"
expect 2 node_key_file "key readable by others" -- --config "$tmp/ok.conf" --node-key-file "$tmp/open.key"
printf 'abcd\n' > "$tmp/short.key"
chmod 0600 "$tmp/short.key"
expect 2 node_key_file "key too short" -- --config "$tmp/ok.conf" --node-key-file "$tmp/short.key"
expect 2 node_key_file "key file missing" -- --config "$tmp/ok.conf" --node-key-file "$tmp/none.key"
# The node's key pair must be the one its member line names.
expect 2 "node 1's public key is not node_key_file's" "another node's key file" -- --config "$tmp/ok.conf" \
	--node-key-file "$tmp/n2.key"
# Hostile member lines: no key, bad hex, wrong length, the all-zero key,
# another member's key, a sixth field.
expect 2 "node 3 has no public key" "member without a public key" -- --config "$tmp/ok.conf" \
	--member 3,10.77.250.13,7001,7000
for bad in "zz${pub1:2}" "${pub1:2}" "${pub1}00" "$(printf '%064d' 0)"; do # not hex, 62, 66, zero
	expect 2 "public key is not 64 hex" "public key '$bad'" -- --config "$tmp/ok.conf" \
		--member "3,10.77.250.13,7001,7000,$bad"
done
expect 2 "nodes 2 and 3 have the same public key" "duplicate public key" -- --config "$tmp/ok.conf" \
	--member "3,10.77.250.13,7001,7000,$pub2"
expect 2 "has more than" "member with six fields" -- --config "$tmp/ok.conf" \
	--member "3,10.77.250.13,7001,7000,$pub1,x"
# Migration: the shared cluster key is refused, naming what replaces it.
expect 2 "peer_key_file: the shared cluster key is no longer used; give this node node_key_file" \
	"a cluster key (before per-node keys)" -- --config "$tmp/ok.conf" --peer-key-file "$tmp/n2.key"
if "$keygen" --public "$tmp/open.key" >/dev/null 2>&1; then
	echo "FAIL: hasp-keygen --public read a key readable by others"
	fails=$((fails + 1))
fi
# The admin key (docs/SECURITY.md 4.8): the same rules as a node's key.
expect 2 admin_key_file "admin key readable by others" -- --config "$tmp/ok.conf" --admin-key-file "$tmp/open.key"
expect 2 admin_key_file "admin key too short" -- --config "$tmp/ok.conf" --admin-key-file "$tmp/short.key"
expect 2 admin_key_file "admin key file missing" -- --config "$tmp/ok.conf" --admin-key-file "$tmp/none.key"
if "$keygen" "$tmp/n1.key" 2>/dev/null; then
	echo "FAIL: hasp-keygen overwrote an existing key"
	fails=$((fails + 1))
fi
expect 2 "syntax.conf:1" "line without =" -- --config "$tmp/syntax.conf"
# Client identities (docs/SECURITY.md 4.1): owner-only, every line valid,
# checked at start before the data directory is touched.
expect 2 client_auth "bad client_auth" -- --config "$tmp/ok.conf" --client-auth maybe
cp "$tmp/identities" "$tmp/open.ids"
chmod 0644 "$tmp/open.ids"
expect 2 client_identities_file "identities readable by others" -- --config "$tmp/ok.conf" \
	--client-identities-file "$tmp/open.ids" --data-dir "$tmp/file"
printf 'app 1234 allow=all:\n' > "$tmp/badkey.ids"
chmod 0600 "$tmp/badkey.ids"
expect 2 "badkey.ids:1" "identity with a short key" -- --config "$tmp/ok.conf" \
	--client-identities-file "$tmp/badkey.ids" --data-dir "$tmp/file"
printf 'app %064d allow=root:\n' 0 > "$tmp/badperm.ids"
chmod 0600 "$tmp/badperm.ids"
expect 2 "badperm.ids:1" "unknown permission" -- --config "$tmp/ok.conf" \
	--client-identities-file "$tmp/badperm.ids" --data-dir "$tmp/file"
if "$keygen" --identity app --identities "$tmp/identities" "$tmp/app2.key" 2>/dev/null; then
	echo "FAIL: hasp-keygen added an identity twice"
	fails=$((fails + 1))
fi
[ ! -e "$tmp/app2.key" ] || { echo "FAIL: hasp-keygen left a key for a refused identity"; fails=$((fails + 1)); }

# Unusable data directories: exit 3, the path named. (A WAL damaged in a
# way that proves lost durable entries is refused the same way; the storage
# tests cover that recovery rule, see docs/STORAGE.md.)
touch "$tmp/file"
expect 3 "$tmp/file" "data_dir is a file" -- --config "$tmp/ok.conf" --data-dir "$tmp/file"
expect 3 "/proc/hasp-itest" "data_dir not creatable" -- --config "$tmp/ok.conf" --data-dir /proc/hasp-itest/data
# Explicit insecure mode: no key needed (the configuration passes and the
# data dir is what stops it).
base node_key_file client_identities_file member > "$tmp/insecure.conf"
echo "member = 1,10.77.250.11,7001,7000" >> "$tmp/insecure.conf"
expect 3 "$tmp/file" "peer_auth = off needs no key" -- --config "$tmp/insecure.conf" --peer-auth off \
	--client-auth off --data-dir "$tmp/file"
[ $fails -eq 0 ] && echo "itest: PASS (config)" || echo "itest: $fails FAILED"
[ $fails -eq 0 ]
