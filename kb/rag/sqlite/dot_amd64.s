#include "textflag.h"

// func dotsAVX2(q, flat []float32, dim int, out []float32)
//
// out[j] = q · flat[j*dim : (j+1)*dim] for every j < len(out). The caller
// guarantees len(q) >= dim and len(flat) >= len(out)*dim.
TEXT ·dotsAVX2(SB), NOSPLIT, $0-80
	MOVQ q_base+0(FP), SI
	MOVQ flat_base+24(FP), DI
	MOVQ dim+48(FP), CX
	MOVQ out_base+56(FP), R8
	MOVQ out_len+64(FP), R9
	MOVQ CX, R10
	SHLQ $2, R10            // bytes per row
	MOVQ CX, R11
	ANDQ $-16, R11          // floats in whole 16-float blocks
	MOVQ CX, R12
	ANDQ $-8, R12           // floats in whole 8-float blocks

row:
	TESTQ R9, R9
	JZ    done
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	XORQ   AX, AX

block16:
	CMPQ        AX, R11
	JGE         block8
	VMOVUPS     (SI)(AX*4), Y2
	VMOVUPS     32(SI)(AX*4), Y3
	VFMADD231PS (DI)(AX*4), Y2, Y0
	VFMADD231PS 32(DI)(AX*4), Y3, Y1
	ADDQ        $16, AX
	JMP         block16

block8:
	CMPQ        AX, R12
	JGE         reduce
	VMOVUPS     (SI)(AX*4), Y2
	VFMADD231PS (DI)(AX*4), Y2, Y0
	ADDQ        $8, AX

reduce:
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0

tail:
	CMPQ        AX, CX
	JGE         store
	VMOVSS      (SI)(AX*4), X2
	VFMADD231SS (DI)(AX*4), X2, X0
	INCQ        AX
	JMP         tail

store:
	VMOVSS X0, (R8)
	ADDQ   $4, R8
	ADDQ   R10, DI
	DECQ   R9
	JMP    row

done:
	VZEROUPPER
	RET
