package filedrop

import "io"

// readAhead reads r on a goroutine of its own, up to readAheadBlocks
// blocks of readAheadBlock bytes before they are asked for, so that what
// inflates a gzipped file and what parses it run on two cores: otherwise
// one goroutine does both, and the import's parse side waits for it (the
// mailing list's mbox.gz: 0.24 of its 0.74 CPU-s; `jervis import
// --no-index` of it 0.87–0.90 → 0.72–0.80 s, BENCHMARKS.md, forty-fifth
// round).
type readAhead struct {
	blocks chan []byte
	free   chan []byte
	block  []byte // the block being read, whole
	cur    []byte // what of it is not read yet
	err    error  // the source's error (io.EOF at its end): set before blocks is closed, read after
	stop   chan struct{}
	done   chan struct{}
}

const (
	readAheadBlock  = 256 << 10
	readAheadBlocks = 4
)

func newReadAhead(r io.Reader) *readAhead {
	ra := &readAhead{
		blocks: make(chan []byte, readAheadBlocks),
		free:   make(chan []byte, readAheadBlocks+2),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	for range readAheadBlocks + 2 {
		ra.free <- make([]byte, readAheadBlock)
	}
	go ra.fill(r)
	return ra
}

// fill reads blocks of r until its end, an error, or Close. A block is
// sent as soon as it is full or r ends or fails; r's error (io.EOF at a
// clean end) is kept as r gave it, for Read to return after the data.
func (ra *readAhead) fill(r io.Reader) {
	defer close(ra.done)
	defer close(ra.blocks)
	for {
		var b []byte
		select {
		case b = <-ra.free:
		case <-ra.stop:
			return
		}
		n, err := 0, error(nil)
		for n < len(b) && err == nil {
			var m int
			m, err = r.Read(b[n:])
			n += m
		}
		if n > 0 {
			select {
			case ra.blocks <- b[:n]:
			case <-ra.stop:
				return
			}
		}
		if err != nil {
			ra.err = err // seen by Read once blocks is closed (deferred above)
			return
		}
	}
}

// Read implements io.Reader.
func (ra *readAhead) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(ra.cur) == 0 {
		b, ok := <-ra.blocks
		if !ok {
			if ra.err == nil { // stopped by Close
				return 0, io.ErrClosedPipe
			}
			return 0, ra.err
		}
		ra.block, ra.cur = b, b
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	if len(ra.cur) == 0 { // the block goes back to be filled again
		ra.free <- ra.block[:cap(ra.block)]
		ra.block, ra.cur = nil, nil
	}
	return n, nil
}

// Close stops the goroutine and waits for it: the source may be closed
// after.
func (ra *readAhead) Close() error {
	close(ra.stop)
	<-ra.done
	return nil
}
