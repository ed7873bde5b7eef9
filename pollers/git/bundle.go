package git

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
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
	if err := setRefs(repo, dir, refs); err != nil {
		return fmt.Errorf("git bundle %s: %w", path, err)
	}
	for _, head := range []string{"main", "master"} {
		name := plumbing.NewBranchReferenceName(head)
		if _, err := repo.Reference(name, false); err == nil {
			return repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, name))
		}
	}
	return nil
}

// setRefs points the bundle's references (but HEAD: a bare repository's
// names a branch, and any whose name git does not allow) at their objects. go-git writes each reference as a file
// of its own (a directory made, a file locked, written and renamed: half a
// CPU-second for the 1,048 branches and tags of the dev bundle), so those
// that are not such a file already go into git's packed-refs file, merged
// with what it holds, in one write. One that is a file (written so by an
// earlier jervis) is set where it is, since it would hide its packed entry.
func setRefs(repo *gogit.Repository, dir string, refs []*plumbing.Reference) error {
	gitDir := dir
	if fi, err := os.Stat(filepath.Join(dir, ".git")); err == nil && fi.IsDir() {
		gitDir = filepath.Join(dir, ".git")
	}
	file := filepath.Join(gitDir, "packed-refs")
	old, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("references: %w", err)
	}
	packed := map[plumbing.ReferenceName]plumbing.Hash{}
	for line := range strings.Lines(string(old)) {
		h, name, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		if ok && len(h) == 40 && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "^") {
			packed[plumbing.ReferenceName(name)] = plumbing.NewHash(h) // peeled lines ("^") are left to git
		}
	}
	for _, ref := range refs {
		name := ref.Name()
		if name == plumbing.HEAD {
			continue
		}
		if !strings.HasPrefix(name.String(), "refs/") || name.Validate() != nil {
			// git writes no such name; the others are kept.
			slog.Warn("git bundle: a reference with a name git does not allow is left out", "dir", dir, "reference", name.String())
			continue
		}
		if _, err := os.Stat(filepath.Join(gitDir, filepath.FromSlash(name.String()))); err == nil {
			if err := repo.Storer.SetReference(ref); err != nil {
				return fmt.Errorf("reference %s: %w", name, err)
			}
			continue
		}
		packed[name] = ref.Hash()
	}
	var b strings.Builder
	b.WriteString("# pack-refs with: sorted \n")
	for _, name := range slices.Sorted(maps.Keys(packed)) {
		fmt.Fprintf(&b, "%s %s\n", packed[name], name)
	}
	tmp, err := os.CreateTemp(gitDir, "packed-refs.jervis-*")
	if err != nil {
		return fmt.Errorf("references: %w", err)
	}
	_, err = tmp.WriteString(b.String())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("references: %w", err)
	}
	return nil
}
