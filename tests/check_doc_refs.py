#!/usr/bin/env python3
"""Every document a file names resolves (docs/ARCHITECTURE.md).

Finds references like `docs/STORAGE.md`, `PROTOCOL.md "Event identity"`
or `STATE_MACHINE.md, "Ownership"` in every tracked file and checks that
the document exists under docs/ (or is the README) and, when a section is
quoted, that a heading or a bold paragraph lead of that document starts
with or contains it. Prints each broken reference; exit 1 if any.

    tests/check_doc_refs.py <source-root>
"""
import os
import re
import subprocess
import sys

os.chdir(sys.argv[1] if len(sys.argv) > 1 else '.')
files=subprocess.run(['git','ls-files'],capture_output=True,text=True).stdout.split()
heads={}
for f in os.listdir('docs'):
    if f.endswith('.md'):
        heads[f]=[l.lstrip('#').strip().lower() for l in open('docs/'+f) if l.startswith('#')]
        heads[f]+=[m.lower() for m in re.findall(r'^(?:[-*] +)?\*\*([^*]+)\*\*', open('docs/'+f).read(), re.M)]
heads['README.md']=[l.lstrip('#').strip().lower() for l in open('README.md') if l.startswith('#')]
bad=0
pat=re.compile(r'(?:docs/)?\b([A-Z][A-Z_]+\.md)\b(?:,?\s*(?:\(|section\s+|§\s*)?["“]([^"”\n]{2,60})["”])?')
for f in files:
    if not os.path.isfile(f): continue
    if f.startswith('docs/STYLE.md'): continue
    try: txt=open(f,encoding='utf-8').read()
    except Exception: continue
    for ln,line in enumerate(txt.splitlines(),1):
        for m in pat.finditer(line):
            name=m.group(1)
            if name not in heads:
                print(f"{f}:{ln}: missing file {name}"); bad+=1; continue
            sec=m.group(2)
            if sec:
                s=sec.lower().strip()
                if not any(h.startswith(s) or s in h for h in heads[name]):
                    print(f"{f}:{ln}: {name} has no section \"{sec}\""); bad+=1
print(f"doc references: {bad} broken" if bad else "doc references: all resolve")
sys.exit(1 if bad else 0)
