package sqlitedb

import (
	"database/sql"
	"encoding/binary"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jervis-dev/jervis/internal/urgency"
)

// checkpointer copies the WAL into the database off the writer's turn.
//
// A checkpoint copies the pages committed to the WAL into the database
// file. SQLite runs one in the committing connection once the WAL holds
// wal_autocheckpoint pages: with one writer connection, that is inside a
// write transaction's turn, and every writer waiting for the file waits for
// the copy too (a CPU profile of `jervis bench --synthetic 100000`: 28.5 of
// its 420 CPU-s, 12.2 of them in graph.db's writer's turns). The
// checkpointer copies them on a connection of its own while the writer goes
// on committing: a PASSIVE checkpoint takes no writer lock and never waits
// for one. The WAL starts again from its beginning only when a write
// transaction begins with all of it copied, so once the checkpointer has
// caught up, the writer copies what was committed meanwhile (the tail: on
// the dev Jira corpus a tenth to a quarter of what the checkpointer copied)
// after its next commit. Crash safety is SQLite's own: a page is in the WAL
// until it has been copied, and the next open replays what was not.
type checkpointer struct {
	conn  *sql.DB
	shm   string        // the WAL index (walIndex)
	pages int64         // copy once this many pages wait, while live documents come
	bulk  int64         // … and otherwise (walBulkPages)
	live  time.Duration // how recent urgent work makes it live (urgency.Window)
	wake  chan struct{} // never closed: a commit racing stop still sends
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once
	// caught: the last copy took every committed page; the writer takes
	// the tail after its next commit.
	caught atomic.Bool
	// copies and tails count the checkpoints each side ran (Writers).
	copies, tails atomic.Int64
	// shmFile is the WAL index, opened once and closed only after every
	// SQLite connection of the database (DB.Close): closing any descriptor
	// of a file drops all the POSIX locks the process holds on it, SQLite's
	// too. Opened and closed at each read, it dropped SQLite's lock that
	// tells other processes the index is in use; a second process opening
	// the database then took the index for its own and rebuilt it, and the
	// first waited out its busy timeout (`jervis serve` and a test reading
	// its data directory).
	shmMu   sync.Mutex
	shmFile *os.File
}

// walSafetyPages is the writer's own wal_autocheckpoint: it checkpoints
// only when the checkpointer fell this far behind (a WAL index it cannot
// read, a reader holding the WAL's start for a long time). Were it the
// bulk size, the writer would run nearly every bulk copy itself.
const walSafetyPages = 4 * walBulkPages

func startCheckpointer(path string, busy time.Duration, pages, bulk int64) (*checkpointer, error) {
	conn, err := sql.Open("sqlite", dsn(path, busy, true))
	if err != nil {
		return nil, err
	}
	conn.SetMaxOpenConns(1)
	c := &checkpointer{conn: conn, shm: path + "-shm", pages: pages, bulk: bulk, live: urgency.Window,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c, nil
}

func (c *checkpointer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.quit:
			return
		case <-c.wake:
		}
		if frames, copied, ok := c.walIndex(); !ok || frames-copied < c.threshold() {
			continue
		}
		var busy, log, copied int64
		if err := c.conn.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &copied); err != nil {
			continue // another process checkpoints this file: the next commit wakes us again
		}
		c.copies.Add(1)
		if busy == 0 && log >= 0 && copied == log {
			c.caught.Store(true)
		}
	}
}

// threshold is how many pages wait before a copy: the live size while
// urgent work (a live document) was seen within c.live, the bulk size
// otherwise.
func (c *checkpointer) threshold() int64 {
	if urgency.Recent(c.live) {
		return c.pages
	}
	return c.bulk
}

// committed runs on the writer connection w after each commit, in the
// writer's turn: it copies the tail when the checkpointer has caught up,
// then wakes the checkpointer.
func (c *checkpointer) committed(w *sql.DB) {
	if c.caught.CompareAndSwap(true, false) {
		var busy, log, copied int64
		if w.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &copied) == nil {
			c.tails.Add(1)
		}
	}
	select {
	case c.wake <- struct{}{}:
	default: // already woken
	}
}

// stop ends the checkpointer; once, however often it is called.
func (c *checkpointer) stop() (err error) {
	c.once.Do(func() {
		close(c.quit)
		<-c.done
		err = c.conn.Close()
	})
	return err
}

// closeIndex closes the WAL index's descriptor, once the database's SQLite
// connections are closed (see shmFile).
func (c *checkpointer) closeIndex() error {
	c.shmMu.Lock()
	defer c.shmMu.Unlock()
	if c.shmFile == nil {
		return nil
	}
	err := c.shmFile.Close()
	c.shmFile = nil
	return err
}

// walIndex reads the WAL index through the one descriptor the checkpointer
// keeps (shmFile), opened at the first read.
func (c *checkpointer) walIndex() (frames, copied int64, ok bool) {
	c.shmMu.Lock()
	defer c.shmMu.Unlock()
	if c.shmFile == nil {
		f, err := os.Open(c.shm)
		if err != nil {
			return 0, 0, false
		}
		c.shmFile = f
	}
	return walIndex(c.shmFile)
}

// walIndex reads the WAL index's header from its -shm file f, as SQLite's
// connections share it (https://www.sqlite.org/walformat.html): the pages
// in the WAL (mxFrame, at byte 16 of each of the header's two copies, bytes
// 0 and 48) and how many of them were copied into the database (nBackfill,
// at byte 96), native byte order, the format's version 3007000 at byte 0.
// ok is false when the file cannot be read, is of another format, or was
// being written (its two copies differ). f must stay open while SQLite
// has the database open (checkpointer.shmFile).
func walIndex(f *os.File) (frames, copied int64, ok bool) {
	var b [100]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return 0, 0, false
	}
	u := func(at int) uint32 { return binary.NativeEndian.Uint32(b[at:]) }
	if u(0) != walIndexVersion || u(16) != u(48+16) {
		return 0, 0, false
	}
	return int64(u(16)), int64(u(96)), true
}

// walIndexVersion is the WAL index's format (WALINDEX_MAX_VERSION).
const walIndexVersion = 3007000
