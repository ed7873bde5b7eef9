#include "textflag.h"

// func dotsI8AVX2(q []int16, rows []int8, stride int, out []int32)
//
// out[j] = Σ q[i]·rows[j*stride+i] for i < stride, every j < len(out).
// stride is a multiple of 16; the caller guarantees len(q) >= stride and
// len(rows) >= len(out)*stride.
TEXT ·dotsI8AVX2(SB), NOSPLIT, $0-80
	MOVQ q_base+0(FP), SI
	MOVQ rows_base+24(FP), DI
	MOVQ stride+48(FP), CX
	MOVQ out_base+56(FP), R8
	MOVQ out_len+64(FP), R9

i8row:
	TESTQ R9, R9
	JZ    i8done
	VPXOR Y0, Y0, Y0
	VPXOR Y3, Y3, Y3
	XORQ  AX, AX

i8block:
	CMPQ      AX, CX
	JGE       i8reduce
	VPMOVSXBW (DI)(AX*1), Y1
	VPMADDWD  (SI)(AX*2), Y1, Y1
	VPADDD    Y1, Y0, Y0
	ADDQ      $16, AX
	CMPQ      AX, CX
	JGE       i8reduce
	VPMOVSXBW (DI)(AX*1), Y2
	VPMADDWD  (SI)(AX*2), Y2, Y2
	VPADDD    Y2, Y3, Y3
	ADDQ      $16, AX
	JMP       i8block

i8reduce:
	VPADDD       Y3, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPADDD       X1, X0, X0
	VMOVD        X0, (R8)
	ADDQ         $4, R8
	ADDQ         CX, DI
	DECQ         R9
	JMP          i8row

i8done:
	VZEROUPPER
	RET
