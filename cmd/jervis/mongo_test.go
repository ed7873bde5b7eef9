package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jervis-dev/jervis/internal/integration"
	"github.com/jervis-dev/jervis/internal/store"
	"github.com/jervis-dev/jervis/internal/store/mongo"
)

// jervis import and status with store.backend mongo: the demo Jira issues
// and Confluence pages go
// into the MongoDB store (the knowledge base stays in the data directory),
// every document is indexed into its tasks, and importing again duplicates
// nothing.
func TestImportDemoIntoMongo(t *testing.T) {
	uri := integration.Env(t, "TEST_MONGO_URI", "export TEST_MONGO_URI=$(deploy/ferretdb.sh start)")
	t.Parallel()
	db := fmt.Sprintf("jervis_cmd_%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() {
		if s, err := mongo.Open(context.Background(), mongo.Options{URI: uri, Database: db}); err == nil {
			_ = s.Drop(context.Background())
			_ = s.Close()
		}
	})
	env := []string{"JERVIS_STORE_BACKEND=mongo", "JERVIS_STORE_MONGO_URI=" + uri, "JERVIS_STORE_MONGO_DATABASE=" + db}
	data := t.TempDir()
	imp := func() string {
		code, out, errOut := runCLI(t, env, "import", "--data", data, "--client", "demo", "../../deploy/demo/jira", "../../deploy/demo/confluence")
		if code != 0 {
			t.Fatalf("import exit %d: %s", code, errOut)
		}
		return out
	}
	status := func() store.Stats {
		code, out, errOut := runCLI(t, env, "status", "--json", "--data", data)
		var st store.Stats
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("status exit %d: %s %s", code, out, errOut)
		}
		return st
	}
	if out := imp(); !strings.Contains(out, "48 documents (48 new versions, 0 unchanged)") {
		t.Fatalf("first import: %s", out)
	}
	st := status()
	if st.Documents["INDEXED"] != 48 || st.TasksByKind["DATA_PROCESSING"]["NEW"] != 48 || st.TasksByKind["LINK_PROCESSING"]["NEW"] == 0 {
		t.Fatalf("after import: documents %v tasks %v", st.Documents, st.TasksByKind)
	}
	if !strings.Contains(fmt.Sprint(st.Backends), "store mongo true") {
		t.Fatalf("status backends: %+v", st.Backends)
	}
	if out := imp(); !strings.Contains(out, "48 documents (0 new versions, 48 unchanged)") {
		t.Fatalf("second import: %s", out)
	}
	if again := status(); again.Documents["INDEXED"] != 48 || again.TasksByKind["LINK_PROCESSING"]["NEW"] != st.TasksByKind["LINK_PROCESSING"]["NEW"] || again.TasksByKind["DATA_PROCESSING"]["NEW"] != 48 {
		t.Fatalf("second import changed counts: %v %v", again.Documents, again.TasksByKind)
	}
}
