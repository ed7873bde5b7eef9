package deploy

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

type demoCommit struct {
	Message, Author, Email, Branch string
	When                           time.Time
	Files                          map[string]string
}

// BuildDemoRepo creates, in dir, the demo corpus's git repository from
// git/commits.json: its commits in order, on main and feature branches.
func BuildDemoRepo(dir string) error {
	raw, err := fs.ReadFile(Demo(), "git/commits.json")
	if err != nil {
		return err
	}
	var commits []demoCommit
	if err := json.Unmarshal(raw, &commits); err != nil {
		return err
	}
	if err := buildRepo(dir, commits); err != nil {
		os.RemoveAll(dir)
		return err
	}
	return nil
}

func buildRepo(dir string, commits []demoCommit) error {
	r, err := gogit.PlainInitWithOptions(dir, &gogit.PlainInitOptions{InitOptions: gogit.InitOptions{DefaultBranch: plumbing.Main}})
	if err != nil {
		return err
	}
	w, err := r.Worktree()
	if err != nil {
		return err
	}
	branch := "main"
	for i, c := range commits {
		if c.Branch != branch && i > 0 {
			name := plumbing.NewBranchReferenceName(c.Branch)
			_, err := r.Reference(name, false)
			if err := w.Checkout(&gogit.CheckoutOptions{Branch: name, Create: err != nil}); err != nil {
				return err
			}
			branch = c.Branch
		}
		for name, body := range c.Files {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				return err
			}
			if _, err := w.Add(name); err != nil {
				return err
			}
		}
		sig := &object.Signature{Name: c.Author, Email: c.Email, When: c.When}
		if _, err := w.Commit(c.Message, &gogit.CommitOptions{Author: sig, Committer: sig}); err != nil {
			return err
		}
	}
	return nil
}
