package filedrop

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// VisitFunc is called by Walk for each file: its name (relative to what
// was walked; inside an archive, the member's path) and a reader of its
// content, valid until the call returns (ParseFrom reads it), or the error
// that kept it from being opened — a file that cannot be opened is still
// visited, so that it can be recorded rather than lost. A non-nil return
// stops the walk with that error.
type VisitFunc func(name string, content io.Reader, err error) error

// Walk visits the files under root: a directory's files (recursively;
// names starting with "." are skipped), a tar archive's regular members
// (.tar, .tar.gz, .tgz), a gzipped file's content (openbmc.mbox.gz is read
// as openbmc.mbox), or root itself. A file given directly is named as
// given; the files of a directory by their path relative to it.
func Walk(root string, visit VisitFunc) error {
	info, err := os.Stat(root)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return walkFile(root, root, visit)
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return visit(rel(root, p), nil, err)
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		return walkFile(p, rel(root, p), visit)
	})
}

// WalkFS visits the files of fsys under dir, as Walk does a directory.
func WalkFS(fsys fs.FS, dir string, visit VisitFunc) error {
	return fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return visit(p, nil, err)
		}
		if d.IsDir() {
			return nil
		}
		f, err := fsys.Open(p)
		if err != nil {
			return visit(p, nil, err)
		}
		defer f.Close()
		return visit(p, f, nil)
	})
}

func rel(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil && r != "." {
		return r
	}
	return p
}

// Archive reports whether Walk reads name as an archive or a gzipped file.
func Archive(name string) bool {
	n := strings.ToLower(name)
	return strings.HasSuffix(n, ".tar") || strings.HasSuffix(n, ".tgz") || strings.HasSuffix(n, ".gz")
}

// walkFile visits one file, or the members of an archive.
func walkFile(p, name string, visit VisitFunc) error {
	lower := strings.ToLower(name)
	f, err := os.Open(p)
	if err != nil {
		return visit(name, nil, err)
	}
	defer f.Close()
	if !Archive(lower) {
		return visit(name, f, nil)
	}
	var r io.Reader = f
	if strings.HasSuffix(lower, ".gz") || strings.HasSuffix(lower, ".tgz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return visit(name, nil, fmt.Errorf("gzip: %w", err))
		}
		defer gz.Close()
		ra := newReadAhead(gz) // inflated on another core than it is parsed
		defer ra.Close()
		r = ra
	}
	if !strings.HasSuffix(lower, ".tar") && !strings.HasSuffix(lower, ".tar.gz") && !strings.HasSuffix(lower, ".tgz") {
		return visit(strings.TrimSuffix(name, filepath.Ext(name)), r, nil) // x.mbox.gz: one gzipped file
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil { // the archive breaks off: what came before is kept
			return visit(name, nil, fmt.Errorf("tar: %w", err))
		}
		if h.Typeflag != tar.TypeReg || strings.HasPrefix(path.Base(h.Name), ".") {
			continue
		}
		if err := visit(path.Clean(h.Name), tr, nil); err != nil {
			return err
		}
	}
}
