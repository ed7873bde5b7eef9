// Package importer stores what is on disk — files, directories, tar
// archives, gzipped files, Git repositories and bundles — as one client's
// source documents, through the one ingest path (pollers.Ingester): each
// file is read by the kind the registry says, and what cannot be read is
// stored with its reason, to be quarantined. `jervis import`, `jervis eval`
// and the demo corpus of `serve --demo` use it.
package importer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	gogit "github.com/go-git/go-git/v5"

	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/pollers"
	"github.com/jervis-dev/jervis/pollers/filedrop"
	"github.com/jervis-dev/jervis/pollers/git"
)

// Store is what an import writes to.
type Store interface {
	store.Documents
	PutClient(ctx context.Context, c store.Client) (created bool, err error)
}

// Summary is what an import stored.
type Summary struct {
	Files, Skipped, Documents, NewVersions, Unparsable, Unreadable int
	Repositories, Commits                                          int
}

// Importer stores files and repositories as documents of one client's
// connection. Set the fields, then call Paths, FS or Repository; Summary
// adds up what they stored.
type Importer struct {
	Store      Store
	Kinds      *pollers.Registry
	Client     string
	Connection string // what the documents' connection is ("import")
	// DataDir is where Git repositories are cloned (under git/).
	DataDir string
	// Transform, when set, rewrites a file's content before it is parsed
	// (jervis eval strips the links it measures against).
	Transform func(name string, r io.Reader) io.Reader
	// Progress, when set, is told of each file or commit stored.
	Progress func(n int)
	// Skipped, when set, is told of a path that does not exist or cannot be
	// read at all (the other paths are imported).
	Skipped func(path string, err error)

	Summary Summary
}

func (im *Importer) ingester() pollers.Ingester {
	return pollers.Ingester{Store: im.Store, Kinds: im.Kinds}
}

func (im *Importer) progress(n int) {
	if im.Progress != nil {
		im.Progress(n)
	}
}

// Paths imports each path: a Git repository or bundle by its commits on
// every branch, anything else as files (filedrop.Walk). The client is
// created when it does not exist. A path that does not exist or cannot be
// read is passed to Skipped, and the others are imported; a failure of the
// store stops it.
//
// A repository after the first path is read ahead — unpacked, its commits
// diffed, a few pages of documents made — while the paths before it are
// imported, on the CPU they leave (Git's unpacking runs on one); its
// documents are still stored after theirs, in the same order as without.
func (im *Importer) Paths(ctx context.Context, paths []string) error {
	if err := im.ensureClient(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	ahead := make([]*pages, len(paths))
	defer func() { // a read-ahead not stored stops, and is waited for
		cancel()
		for _, ps := range ahead {
			if ps != nil {
				<-ps.done
			}
		}
	}()
	repo := make([]bool, len(paths))
	seen := map[string]bool{} // a path named twice is read when reached
	for i, p := range paths {
		repo[i] = IsRepository(p)
		if i > 0 && repo[i] && !seen[absPath(p)] {
			ahead[i] = im.readAhead(ctx, p, "")
		}
		seen[absPath(p)] = true
	}
	for i, p := range paths {
		var err error
		if repo[i] {
			if ahead[i] == nil {
				ahead[i] = im.readAhead(ctx, p, "")
			}
			_, err = im.store(ctx, ahead[i])
		} else {
			err = im.walk(ctx, func(visit filedrop.VisitFunc) error { return filedrop.Walk(p, visit) })
		}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			if im.Skipped != nil {
				im.Skipped(p, err)
			}
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// FS imports the files of fsys under dir (the compiled-in demo corpus).
func (im *Importer) FS(ctx context.Context, fsys fs.FS, dir string) error {
	if err := im.ensureClient(ctx); err != nil {
		return err
	}
	return im.walk(ctx, func(visit filedrop.VisitFunc) error { return filedrop.WalkFS(fsys, dir, visit) })
}

func (im *Importer) ensureClient(ctx context.Context) error {
	_, err := im.Store.PutClient(ctx, store.Client{ID: im.Client, Name: im.Client})
	return err
}

// walk runs a walk of files (filedrop.Walk or WalkFS, given the visit) with
// their documents stored on a goroutine of their own, in the order parsed,
// those waiting for it together (up to queued in one write):
// on two cores a file is parsed while the documents before it are written
// (the dev Jira corpus's import: parsing and shaping about half its CPU,
// the store's writes the other half). A failure of the store stops the
// walk at the next document and is returned; everything parsed before it
// is stored or was never acknowledged (an import run again stores what is
// missing and leaves what is there).
func (im *Importer) walk(ctx context.Context, run func(filedrop.VisitFunc) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	queue := make(chan store.Document, queued)
	var stored error // the writer's; read after done
	done := make(chan struct{})
	go func() {
		defer close(done)
		in := im.ingester()
		batch := make([]store.Document, 0, queued)
		for d := range queue {
			if stored != nil {
				continue // drain: the walk stops at its next document
			}
			// What waits is stored together, in one write: one
			// document, when the parser is the slower.
			batch = append(batch[:0], d)
		more:
			for len(batch) < queued {
				select {
				case d, ok := <-queue:
					if !ok {
						break more
					}
					batch = append(batch, d)
				default:
					break more
				}
			}
			receipts, err := in.Documents(ctx, im.Client, im.Connection, batch...)
			im.count(receipts)
			if err != nil {
				stored = err
				cancel(err)
			}
		}
	}()
	emit := func(d store.Document) error {
		if ctx.Err() != nil { // before the select, which might still take d
			return &pollers.StoreError{Err: context.Cause(ctx)}
		}
		select {
		case queue <- d:
			return nil
		case <-ctx.Done():
			return &pollers.StoreError{Err: context.Cause(ctx)}
		}
	}
	err := run(im.visit(emit))
	close(queue)
	<-done
	if stored != nil {
		return stored
	}
	return err
}

// queued is how many parsed documents may wait for the writer: enough to
// keep it busy while a large file is parsed, few enough to bound memory.
const queued = 64

// visit parses one file visited by a walk, giving emit its documents as
// they are parsed (a mailbox message by message), or, when it cannot be
// read or breaks off, a document that says so.
func (im *Importer) visit(emit func(store.Document) error) filedrop.VisitFunc {
	return func(name string, r io.Reader, err error) error {
		im.Summary.Files++
		im.progress(1)
		if err != nil && filedrop.Archive(name) { // a broken archive: recorded under its own name
			return emit(im.Kinds.Unreadable(name, err))
		}
		if im.Transform != nil && err == nil {
			r = im.Transform(name, r)
		}
		err = im.ingester().FileDocuments(name, r, err, emit)
		if errors.Is(err, pollers.ErrUnsupported) {
			im.Summary.Skipped++
			return nil
		}
		return err
	}
}

// count adds what the ingester stored to the summary.
func (im *Importer) count(receipts []pollers.Receipt) {
	for _, r := range receipts {
		im.Summary.Documents++
		if r.Created {
			im.Summary.NewVersions++
		}
		switch {
		case strings.HasPrefix(r.Unparsable, "unreadable: "):
			im.Summary.Unreadable++
			im.Summary.Unparsable++
		case r.Unparsable != "":
			im.Summary.Unparsable++
		}
	}
}

// Repository stores the commits and branches of a Git repository or
// bundle through the git source, cloned under DataDir; it returns the
// cursor after the last page (a poller that goes on from there sees only
// what is new).
func (im *Importer) Repository(ctx context.Context, path string) error {
	_, err := im.repository(ctx, path, "")
	return err
}

// repository stores a repository's pages as they are read (readAhead).
func (im *Importer) repository(ctx context.Context, path, clone string) (cursor string, err error) {
	ctx, cancel := context.WithCancel(ctx)
	ps := im.readAhead(ctx, path, clone)
	defer func() {
		cancel()
		<-ps.done
	}()
	return im.store(ctx, ps)
}

// readAhead is aheadPages of a repository's pages, cloned under
// DataDir/git/clone (by default a name made from its path): a goroutine
// reads them (Poll after Poll, each page's cursor for the next) until the
// last, an error, or ctx's end.
func (im *Importer) readAhead(ctx context.Context, path, clone string) *pages {
	ps := &pages{c: make(chan page, aheadPages), done: make(chan struct{})}
	go func() {
		defer close(ps.done)
		defer close(ps.c)
		dir := filepath.Join(im.DataDir, "git", cmp.Or(clone, "import-"+store.HashID([]byte(absPath(path)))[7:]))
		src, err := git.New(git.Config{URL: absPath(path), Dir: dir})
		if err != nil {
			ps.c <- page{err: err} // the channel is empty
			return
		}
		cursor := ""
		for {
			b, err := src.Poll(ctx, cursor)
			select {
			case ps.c <- page{b, err}:
			case <-ctx.Done():
				return
			}
			if err != nil || !b.More {
				return
			}
			cursor = b.Cursor
		}
	}()
	return ps
}

// aheadPages is how many pages of a repository (of 500 commits) are read
// before the import stores them: enough to keep a core busy while other
// paths are imported, few enough to bound memory.
const aheadPages = 8

// pages are a repository's pages as they are read; done is closed when
// the reading has stopped.
type pages struct {
	c    chan page
	done chan struct{}
}

type page struct {
	b   pollers.Batch
	err error
}

// store stores a repository's pages in order; it returns the cursor after
// the last page stored (a poller that goes on from there sees only what is
// new).
func (im *Importer) store(ctx context.Context, ps *pages) (cursor string, err error) {
	im.Summary.Repositories++
	for p := range ps.c {
		if p.err != nil {
			return cursor, p.err
		}
		im.Summary.Commits += len(p.b.Documents)
		im.progress(len(p.b.Documents))
		receipts, err := im.ingester().Documents(ctx, im.Client, im.Connection, p.b.Documents...)
		im.count(receipts)
		if err != nil {
			return cursor, err
		}
		if cursor = p.b.Cursor; !p.b.More {
			return cursor, nil
		}
	}
	return cursor, ctx.Err()
}

func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// IsRepository reports whether path is a Git repository (a work tree or a
// bare one) or a Git bundle.
func IsRepository(path string) bool {
	if git.IsBundle(path) {
		return true
	}
	if info, err := os.Stat(path); err != nil || !info.IsDir() {
		return false
	}
	_, err := gogit.PlainOpen(path)
	return err == nil
}

// CountFiles counts the files under paths (for a progress bar); -1 when an
// archive or a repository makes the number unknown.
func CountFiles(paths []string) int {
	n, unknown := 0, false
	for _, root := range paths {
		if IsRepository(root) {
			return -1
		}
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
			case d.IsDir() && p != root && strings.HasPrefix(d.Name(), "."):
				return filepath.SkipDir
			case filedrop.Archive(p):
				unknown = true
				return fs.SkipAll
			case !d.IsDir():
				n++
			}
			return nil
		})
	}
	if unknown {
		return -1
	}
	return n
}

// String is the summary as `jervis import` prints it.
func (s Summary) String() string {
	out := fmt.Sprintf("%d documents (%d new versions, %d unchanged), %d unparsable, %d skipped (unsupported type)",
		s.Documents, s.NewVersions, s.Documents-s.NewVersions, s.Unparsable, s.Skipped)
	if s.Unreadable > 0 {
		out += fmt.Sprintf(", %d unreadable", s.Unreadable)
	}
	if s.Repositories > 0 {
		out += fmt.Sprintf("; %d Git repositories: %d commits and branches", s.Repositories, s.Commits)
	}
	return out
}
