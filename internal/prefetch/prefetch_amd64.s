//go:build !purego

#include "textflag.h"

// func lines(p unsafe.Pointer, size uintptr)
TEXT ·lines(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ p+0(FP), AX
	MOVQ size+8(FP), CX
	LEAQ -1(AX)(CX*1), CX // the last byte
	ANDQ $~63, AX         // its first line
loop:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	CMPQ AX, CX
	JLS  loop
	RET
