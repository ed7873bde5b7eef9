package git

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// ErrNotBundle means a file is not a Git bundle (v2 or v3).
var ErrNotBundle = errors.New("not a git bundle")

// IsBundle reports whether path is a Git bundle file (by its first line).
func IsBundle(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	return err == nil && isBundleHeader(line)
}

func isBundleHeader(line string) bool {
	line = strings.TrimSpace(line)
	return line == "# v2 git bundle" || line == "# v3 git bundle"
}

// Unbundle writes the objects and references of the Git bundle at path
// (what `git bundle create` writes: a header listing references, then a
// packfile) into a bare repository at dir, created when missing. Every
// reference of the bundle is set (refs/heads/* are the branches a Source
// polls). A bundle that needs commits it does not carry (an incremental
// bundle) is refused unless dir already has them.
func Unbundle(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("git bundle: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	header, err := r.ReadString('\n')
	if err != nil || !isBundleHeader(header) {
		return fmt.Errorf("git bundle %s: %w", path, ErrNotBundle)
	}
	var refs []*plumbing.Reference
	var prerequisites []plumbing.Hash
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("git bundle %s: header: %w", path, err)
		}
		line = strings.TrimRight(line, "\n")
		if line == "" {
			break // the packfile follows
		}
		switch {
		case strings.HasPrefix(line, "@"): // v3 capability
		case strings.HasPrefix(line, "-"):
			h, _, _ := strings.Cut(line[1:], " ")
			prerequisites = append(prerequisites, plumbing.NewHash(h))
		default:
			h, name, ok := strings.Cut(line, " ")
			if !ok || len(h) != 40 {
				return fmt.Errorf("git bundle %s: reference line %q", path, line)
			}
			refs = append(refs, plumbing.NewHashReference(plumbing.ReferenceName(name), plumbing.NewHash(h)))
		}
	}
	repo, err := gogit.PlainOpen(dir)
	if errors.Is(err, gogit.ErrRepositoryNotExists) {
		repo, err = gogit.PlainInit(dir, true)
	}
	if err != nil {
		return fmt.Errorf("git bundle: repository %s: %w", dir, err)
	}
	for _, h := range prerequisites {
		if _, err := repo.CommitObject(h); err != nil {
			return fmt.Errorf("git bundle %s: needs commit %s, which it does not carry (an incremental bundle)", path, h)
		}
	}
	if err := packfile.UpdateObjectStorage(repo.Storer, io.Reader(r)); err != nil {
		return fmt.Errorf("git bundle %s: packfile: %w", path, err)
	}
	for _, ref := range refs {
		if ref.Name() == plumbing.HEAD {
			continue // a bare repository's HEAD names a branch, set below
		}
		if err := repo.Storer.SetReference(ref); err != nil {
			return fmt.Errorf("git bundle %s: reference %s: %w", path, ref.Name(), err)
		}
	}
	for _, head := range []string{"main", "master"} {
		name := plumbing.NewBranchReferenceName(head)
		if _, err := repo.Reference(name, false); err == nil {
			return repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, name))
		}
	}
	return nil
}
