package sqlitedb

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	"modernc.org/memory"
	sqlite3 "modernc.org/sqlite/lib"
)

// The SQLite engine is set up once for the process, before any connection
// opens (engineErr), so that its connections do not wait for each other.
//
// As modernc.org/sqlite builds it (SQLITE_ENABLE_MEMORY_MANAGEMENT), every
// connection's page cache is one group under one mutex, and every
// allocation goes through libc's one allocator under another. The pipeline
// runs three writers and their readers at once, each on its own connection:
// in an execution trace of `jervis bench` on the mailing list, the writers
// holding their database's write lock spent 0.92 s (2,399 times) waiting
// for a processor after blocking on the page caches' mutex, and 0.67 s
// after blocking on the allocator's; jervis.db's writer, the lock the list
// waits on, 0.78 s of the 2.55 s it was held. A goroutine woken from a
// mutex runs only when the goroutine that woke it stops; on two busy cores
// that is often a millisecond later (BENCHMARKS.md, forty-ninth round).
//
// So each page cache is its own group (SQLite's own mode when built without
// memory management: a cache is used by one connection at a time, which
// its connection's mutex ensures, so it needs no mutex of its own), and
// SQLite allocates from arenas: a connection keeps to one arena, and
// arenas do not share a lock. What the driver itself allocates (a bound
// text's C copy) still goes through libc's allocator.
var engineErr = setUpEngine()

// EngineErr says why SQLite runs as built, with its shared page cache and
// allocator, when it does: another package initialised SQLite before this
// one could configure it. Nothing is wrong then, only slower.
func EngineErr() error { return engineErr }

// pcache1 is SQLite's page cache state (sqlite3.c's pcache1_g):
// separateCache chooses one group per cache. SQLite sets it when
// initialised and reads it when a cache is created; nothing exports it.
//
//go:linkname pcache1 modernc.org/sqlite/lib._pcache1_g
var pcache1 sqlite3.TPCacheGlobal

func setUpEngine() error {
	tls := libc.NewTLS()
	defer tls.Close()
	methods := libc.Xcalloc(tls, 1, types.Size_t(unsafe.Sizeof(sqlite3.Tsqlite3_mem_methods{})))
	va := libc.Xmalloc(tls, types.Size_t(unsafe.Sizeof(uintptr(0))))
	if methods == 0 || va == 0 {
		return errors.New("sqlite: set up the engine: out of memory")
	}
	defer libc.Xfree(tls, va)
	m := at[sqlite3.Tsqlite3_mem_methods](methods)
	m.FxMalloc = cFunc(arenaMalloc)
	m.FxFree = cFunc(arenaFree)
	m.FxRealloc = cFunc(arenaRealloc)
	m.FxSize = cFunc(arenaSize)
	m.FxRoundup = cFunc(arenaRoundup)
	m.FxInit = cFunc(arenaInit)
	m.FxShutdown = cFunc(arenaShutdown)
	// SQLite keeps the pointer to methods: it is never freed.
	if rc := sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_MALLOC, libc.VaList(va, methods)); rc != sqlite3.SQLITE_OK {
		libc.Xfree(tls, methods)
		return fmt.Errorf("sqlite: set up the engine: SQLITE_CONFIG_MALLOC: code %d (SQLite was initialised before)", rc)
	}
	if rc := sqlite3.Xsqlite3_initialize(tls); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("sqlite: set up the engine: initialise: code %d", rc)
	}
	pcache1.FseparateCache = 1
	return nil
}

// cFunc is f as the transpiled C code calls a function pointer: the
// address of a Go func value (how modernc.org/sqlite passes its own
// callbacks; see its cFuncPointer).
func cFunc[T any](f T) uintptr {
	return *(*uintptr)(unsafe.Pointer(&struct{ f T }{f}))
}

// at is the C memory at address p (outside the Go heap) as a *T.
func at[T any](p uintptr) *T {
	return (*T)(*(*unsafe.Pointer)(unsafe.Pointer(&p)))
}

// arenaCount arenas serve SQLite's allocations, a connection's from one
// of them, given round-robin by its libc thread state.
const arenaCount = 8

type arena struct {
	mu   sync.Mutex
	a    memory.Allocator
	live int64 // bytes allocated and not freed (tests)
	_    [64]byte
}

var (
	arenas    [arenaCount]arena
	arenaOf   [1024]atomic.Uint32 // by libc.TLS.ID: arena+1, 0 not given yet
	arenaNext atomic.Uint32
)

// arenaHeader precedes each allocation: its arena and its size. Sixteen
// bytes keep what follows as aligned as the allocator's blocks.
type arenaHeader struct {
	arena uint32
	_     uint32
	size  int64
}

const arenaHeaderSize = unsafe.Sizeof(arenaHeader{})

func arenaFor(tls *libc.TLS) uint32 {
	slot := &arenaOf[uint32(tls.ID)%uint32(len(arenaOf))]
	if a := slot.Load(); a != 0 {
		return a - 1
	}
	a := arenaNext.Add(1) % arenaCount
	if !slot.CompareAndSwap(0, a+1) {
		return slot.Load() - 1
	}
	return a
}

// arenaMalloc is SQLite's xMalloc: n bytes, or 0.
func arenaMalloc(tls *libc.TLS, n int32) uintptr {
	if n <= 0 {
		return 0
	}
	i := arenaFor(tls)
	ar := &arenas[i]
	ar.mu.Lock()
	p, err := ar.a.UintptrMalloc(int(n) + int(arenaHeaderSize))
	if err == nil {
		ar.live += int64(n)
	}
	ar.mu.Unlock()
	if err != nil || p == 0 {
		return 0
	}
	*at[arenaHeader](p) = arenaHeader{arena: i, size: int64(n)}
	return p + arenaHeaderSize
}

// arenaFree is SQLite's xFree; the block goes back to its own arena,
// whichever connection frees it.
func arenaFree(tls *libc.TLS, p uintptr) {
	if p == 0 {
		return
	}
	base := p - arenaHeaderSize
	h := at[arenaHeader](base)
	ar := &arenas[h.arena]
	ar.mu.Lock()
	ar.live -= h.size
	_ = ar.a.UintptrFree(base) // only an address it did not give fails
	ar.mu.Unlock()
}

// arenaSize is SQLite's xSize: what was asked for p.
func arenaSize(tls *libc.TLS, p uintptr) int32 {
	if p == 0 {
		return 0
	}
	return int32(at[arenaHeader](p - arenaHeaderSize).size)
}

// arenaRealloc is SQLite's xRealloc: p resized to n bytes, in place when
// its block has room, or 0 with p left as it was.
func arenaRealloc(tls *libc.TLS, p uintptr, n int32) uintptr {
	if p == 0 {
		return arenaMalloc(tls, n)
	}
	if n <= 0 {
		return 0
	}
	base := p - arenaHeaderSize
	h := at[arenaHeader](base)
	if memory.UintptrUsableSize(base) >= int(n)+int(arenaHeaderSize) {
		ar := &arenas[h.arena]
		ar.mu.Lock()
		ar.live += int64(n) - h.size
		h.size = int64(n)
		ar.mu.Unlock()
		return p
	}
	q := arenaMalloc(tls, n)
	if q == 0 {
		return 0
	}
	keep := min(h.size, int64(n))
	copy(unsafe.Slice(at[byte](q), keep), unsafe.Slice(at[byte](p), keep))
	arenaFree(tls, p)
	return q
}

// arenaRoundup is SQLite's xRoundup: sizes by eight.
func arenaRoundup(tls *libc.TLS, n int32) int32 { return (n + 7) &^ 7 }

func arenaInit(tls *libc.TLS, _ uintptr) int32 { return sqlite3.SQLITE_OK }

func arenaShutdown(tls *libc.TLS, _ uintptr) {}

// arenaLive is the bytes SQLite has allocated and not freed.
func arenaLive() int64 {
	var n int64
	for i := range arenas {
		arenas[i].mu.Lock()
		n += arenas[i].live
		arenas[i].mu.Unlock()
	}
	return n
}
