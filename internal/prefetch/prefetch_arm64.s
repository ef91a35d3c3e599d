//go:build !purego

#include "textflag.h"

// func lines(p unsafe.Pointer, size uintptr)
TEXT ·lines(SB), NOSPLIT|NOFRAME, $0-16
	MOVD p+0(FP), R0
	MOVD size+8(FP), R1
	ADD  R0, R1, R1
	SUB  $1, R1, R1   // the last byte
	AND  $~63, R0, R0 // its first line
loop:
	PRFM (R0), PLDL1KEEP
	ADD  $64, R0, R0
	CMP  R1, R0
	BLS  loop
	RET
