/*
 * `hasp`: the command-line client of a hasp cluster. Everything lives in
 * tools/hasp_cli.c so that tests can drive the parser and commands
 * directly; docs/CLIENT.md is the reference.
 */
#include "tools/hasp_cli.h"

int main(int argc, char **argv)
{
	return hasp_cli_main(argc, argv);
}
