package store

import "testing"

// A backlog is empty when no state of either queue counts anything.
func TestBacklogTotalAndEmpty(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		b     Backlog
		total int64
	}{
		{Backlog{}, 0},
		{Backlog{Documents: Counts{"NEW": 0, "INDEXING": 0}, Tasks: Counts{"NEW": 0}}, 0},
		{Backlog{Documents: Counts{"NEW": 3, "INDEXING": 1}}, 4},
		{Backlog{Tasks: Counts{"RETRY": 1}}, 1},
		{Backlog{Documents: Counts{"NEW": 2}, Tasks: Counts{"NEW": 5, "QUALIFICATION_IN_PROGRESS": 7}}, 14},
	} {
		if got := c.b.Documents.Total() + c.b.Tasks.Total(); got != c.total {
			t.Errorf("%+v: total %d, want %d", c.b, got, c.total)
		}
		if got := c.b.Empty(); got != (c.total == 0) {
			t.Errorf("%+v: Empty %v", c.b, got)
		}
	}
}
