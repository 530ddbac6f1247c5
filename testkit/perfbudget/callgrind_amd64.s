#include "textflag.h"

// func clientRequest(args *[6]uintptr) uintptr
//
// Valgrind's client request: the magic preamble (four rotations of DI that
// leave it unchanged, then XCHGQ BX, BX), with AX pointing at the request
// and its arguments. Outside Valgrind it is a few no-ops returning 0 (DX).
TEXT ·clientRequest(SB), NOSPLIT, $0-16
	MOVQ args+0(FP), AX
	MOVQ $0, DX
	ROLQ $3, DI
	ROLQ $13, DI
	ROLQ $61, DI
	ROLQ $51, DI
	XCHGQ BX, BX
	MOVQ DX, ret+8(FP)
	RET
