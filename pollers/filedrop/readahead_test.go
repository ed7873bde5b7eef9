package filedrop

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
	"time"
)

// What is read ahead is what the source gives, in order, whatever the
// sizes of the source's reads and the reader's (smaller and larger than a
// block), and the source's error comes after its last byte, as it gave it.
func TestReadAheadKeepsTheBytesAndTheError(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, readAheadBlock - 1, readAheadBlock, readAheadBlock + 1, 3*readAheadBlock + 17, 11 * readAheadBlock} {
		src := make([]byte, size)
		for i := range src {
			src[i] = byte(rnd.Uint32())
		}
		for _, sourceErr := range []error{nil, io.ErrUnexpectedEOF, errors.New("disk read error")} {
			var r io.Reader = iotest.HalfReader(bytes.NewReader(src)) // short reads
			if sourceErr != nil {
				r = io.MultiReader(r, iotest.ErrReader(sourceErr))
			}
			ra := newReadAhead(r)
			var got []byte
			buf := make([]byte, 1+rnd.IntN(3*readAheadBlock))
			var err error
			for {
				var n int
				n, err = ra.Read(buf[:1+rnd.IntN(len(buf))])
				got = append(got, buf[:n]...)
				if err != nil {
					break
				}
			}
			ra.Close()
			want := cmpErr(sourceErr)
			if !bytes.Equal(got, src) || err != want {
				t.Fatalf("%d bytes, source error %v: read %d bytes (same: %v), error %v", size, sourceErr, len(got), bytes.Equal(got, src), err)
			}
		}
	}
}

func cmpErr(err error) error {
	if err == nil {
		return io.EOF
	}
	return err
}

// Closed before the end, the goroutine stops and Close returns: the
// source is not read any further.
func TestReadAheadStopsWhenClosed(t *testing.T) {
	t.Parallel()
	endless := iotest.OneByteReader(zeros{})
	ra := newReadAhead(endless)
	if n, err := ra.Read(make([]byte, 10)); n == 0 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	closed := make(chan struct{})
	go func() { ra.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	select {
	case <-ra.done:
	default:
		t.Fatal("the goroutine still runs")
	}
	// After Close, what was read ahead can still be read; then a read
	// fails, rather than ending as if the source had ended.
	for {
		if _, err := ra.Read(make([]byte, 1<<20)); err != nil {
			if err != io.ErrClosedPipe {
				t.Fatalf("read after Close: %v", err)
			}
			break
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
