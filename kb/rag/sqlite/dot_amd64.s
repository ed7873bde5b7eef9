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

// func dotsScaledAVX2(q []int16, rows []int8, stride int, scales []float32, thr float32, out []float32, above []uint8)
//
// out[j] = float32(Σ q[i]·rows[j*stride+i]) · scales[j] for every j <
// len(out): dotsI8's integers, converted and scaled as Go converts and
// multiplies float32s, four rows at a time (the query's block loaded once
// for four, one reduction for four); bit b of above[g] is set when
// out[4g+b] > thr. The caller guarantees len(out) % 4 == 0, len(scales) >=
// len(out) and len(above) >= len(out)/4, as dotsI8 the rest.
TEXT ·dotsScaledAVX2(SB), NOSPLIT, $0-136
	MOVQ         q_base+0(FP), SI
	MOVQ         rows_base+24(FP), DI
	MOVQ         stride+48(FP), CX
	MOVQ         scales_base+56(FP), DX
	VBROADCASTSS thr+80(FP), X9
	MOVQ         out_base+88(FP), R8
	MOVQ         out_len+96(FP), R9
	MOVQ         above_base+112(FP), R13

four:
	CMPQ R9, $4
	JLT  done
	LEAQ (DI)(CX*1), R10
	LEAQ (R10)(CX*1), R11
	LEAQ (R11)(CX*1), R12
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	XORQ  AX, AX

fourblock:
	VMOVDQU   (SI)(AX*2), Y4
	VPMOVSXBW (DI)(AX*1), Y5
	VPMADDWD  Y4, Y5, Y5
	VPADDD    Y5, Y0, Y0
	VPMOVSXBW (R10)(AX*1), Y6
	VPMADDWD  Y4, Y6, Y6
	VPADDD    Y6, Y1, Y1
	VPMOVSXBW (R11)(AX*1), Y7
	VPMADDWD  Y4, Y7, Y7
	VPADDD    Y7, Y2, Y2
	VPMOVSXBW (R12)(AX*1), Y8
	VPMADDWD  Y4, Y8, Y8
	VPADDD    Y8, Y3, Y3
	ADDQ      $16, AX
	CMPQ      AX, CX
	JLT       fourblock

	// Per 128-bit lane: [a01 a23 b01 b23], [c01 c23 d01 d23], then
	// [a b c d]; the two lanes added.
	VPHADDD      Y1, Y0, Y0
	VPHADDD      Y3, Y2, Y2
	VPHADDD      Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VCVTDQ2PS    X0, X0
	VMULPS       (DX), X0, X0
	VMOVUPS      X0, (R8)
	VCMPPS       $0x1e, X9, X0, X2 // out > thr (ordered, quiet)
	VMOVMSKPS    X2, BX
	MOVB         BX, (R13)
	INCQ         R13
	LEAQ         (R12)(CX*1), DI
	ADDQ         $16, DX
	ADDQ         $16, R8
	SUBQ         $4, R9
	JMP          four

done:
	VZEROUPPER
	RET
