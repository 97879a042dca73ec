/*
 * haspctl: the hasp operator CLI (docs/CONTROL.md). The commands live in
 * haspctl_cli.c so the tests run them in process.
 */
#include <stdio.h>

#include "control/haspctl_cli.h"

int main(int argc, char **argv)
{
	return haspctl_main(argc, argv, stdout, stderr);
}
