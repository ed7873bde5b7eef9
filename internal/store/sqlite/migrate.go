package sqlite

// migrations are applied in order; migration i brings the schema to version
// i+1 (kept in PRAGMA user_version). Never edit one that has shipped: append.
var migrations = []string{
	// 1: the pipeline state of ARCHITECTURE §4.
	`
CREATE TABLE documents (
	id           TEXT PRIMARY KEY,
	client       TEXT NOT NULL,
	source_type  TEXT NOT NULL,
	connection   TEXT NOT NULL DEFAULT '',
	external_id  TEXT NOT NULL,
	version      INTEGER NOT NULL,
	content_hash TEXT NOT NULL,
	raw          BLOB,
	normalized   TEXT NOT NULL,
	observed_at  INTEGER NOT NULL,
	state        TEXT NOT NULL,
	lease_owner  TEXT NOT NULL DEFAULT '',
	lease_until  INTEGER NOT NULL DEFAULT 0,
	attempts     INTEGER NOT NULL DEFAULT 0,
	max_attempts INTEGER NOT NULL,
	run_after    INTEGER NOT NULL DEFAULT 0,
	error        TEXT,
	updated_at   INTEGER NOT NULL,
	UNIQUE (client, source_type, external_id, version)
) STRICT;
CREATE INDEX documents_claim ON documents (state, run_after, observed_at);
CREATE INDEX documents_lease ON documents (lease_until) WHERE lease_until > 0;
CREATE INDEX documents_client ON documents (client, state);

CREATE TABLE tasks (
	id             TEXT PRIMARY KEY,
	kind           TEXT NOT NULL,
	client         TEXT NOT NULL,
	source_doc     TEXT NOT NULL,
	payload        TEXT,
	correlation_id TEXT NOT NULL,
	priority       INTEGER NOT NULL DEFAULT 0,
	state          TEXT NOT NULL,
	attempts       INTEGER NOT NULL DEFAULT 0,
	max_attempts   INTEGER NOT NULL,
	run_after      INTEGER NOT NULL DEFAULT 0,
	lease_owner    TEXT NOT NULL DEFAULT '',
	lease_until    INTEGER NOT NULL DEFAULT 0,
	last_error     TEXT,
	budget         TEXT,
	usage          TEXT,
	result         BLOB,
	created_at     INTEGER NOT NULL,
	updated_at     INTEGER NOT NULL,
	-- stage is the worker stage that may claim the task now (store.Stage).
	stage TEXT GENERATED ALWAYS AS (CASE
		WHEN state IN ('NEW', 'RETRY') THEN 'qualify'
		WHEN state = 'READY_FOR_GPU' THEN 'execute' END) VIRTUAL
) STRICT;
CREATE INDEX tasks_claim ON tasks (stage, priority DESC, run_after);
CREATE INDEX tasks_lease ON tasks (lease_until) WHERE lease_until > 0;
CREATE INDEX tasks_client ON tasks (client, state);
CREATE INDEX tasks_source ON tasks (source_doc);

CREATE TABLE task_memory (
	task_id    TEXT PRIMARY KEY,
	client     TEXT NOT NULL,
	data       TEXT NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE events (
	seq          INTEGER PRIMARY KEY AUTOINCREMENT,
	at           INTEGER NOT NULL,
	client       TEXT NOT NULL,
	aggregate    TEXT NOT NULL,
	aggregate_id TEXT NOT NULL,
	type         TEXT NOT NULL,
	data         TEXT
) STRICT;
CREATE INDEX events_client ON events (client, seq);
CREATE INDEX events_aggregate ON events (aggregate_id, seq);

CREATE TABLE aliases (
	client     TEXT NOT NULL,
	alias      TEXT NOT NULL,
	canonical  TEXT NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (client, alias)
) STRICT, WITHOUT ROWID;

CREATE TABLE cursors (
	key        TEXT PRIMARY KEY,
	value      TEXT NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE clients (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE api_keys (
	id         TEXT PRIMARY KEY,
	client     TEXT NOT NULL,
	role       TEXT NOT NULL,
	name       TEXT NOT NULL,
	hash       TEXT NOT NULL UNIQUE,
	created_at INTEGER NOT NULL,
	revoked_at INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX api_keys_client ON api_keys (client);
`,
	// 2: link-safety patterns per client.
	`
CREATE TABLE link_patterns (
	client     TEXT NOT NULL,
	kind       TEXT NOT NULL,
	pattern    TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (client, kind, pattern)
) STRICT, WITHOUT ROWID;
`,
	// 3: cached model answers.
	`
CREATE TABLE model_answers (
	key        TEXT PRIMARY KEY,
	answer     BLOB NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;
`,
	// 4: listing pages (API) by client, most recently updated first.
	`
CREATE INDEX documents_list ON documents (client, updated_at DESC, id);
CREATE INDEX tasks_list ON tasks (client, updated_at DESC, id);
`,
	// 5: documents kept with parser warnings; a client's declared mention
	// namespaces.
	`
ALTER TABLE documents ADD COLUMN degraded INTEGER NOT NULL DEFAULT 0;
UPDATE documents SET degraded = 1 WHERE json_extract(normalized, '$.warnings') IS NOT NULL;
CREATE INDEX documents_degraded ON documents (client, updated_at DESC, id) WHERE degraded = 1;
ALTER TABLE clients ADD COLUMN namespaces TEXT NOT NULL DEFAULT '[]';
`,
	// 6: Stats from indexes, not table scans (the documents' rows carry
	// their raw payloads; counting them read every page: 0.25 s at 5,000
	// Jira issues, each time).
	`
CREATE INDEX documents_stats ON documents (client, source_type, state);
CREATE INDEX tasks_stats ON tasks (client, kind, state);
CREATE INDEX tasks_usage ON tasks (kind) WHERE usage IS NOT NULL AND usage <> '{}';
CREATE INDEX tasks_state ON tasks (state, updated_at);
`,
	// 7: live documents (polls, the ingest API) are claimed before bulk
	// imports.
	`
ALTER TABLE documents ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
DROP INDEX documents_claim;
CREATE INDEX documents_claim ON documents (state, priority DESC, run_after, observed_at);
`,
	// 8: identity resolution: what sources say about who people are,
	// people's decisions, and why an alias was made.
	`
CREATE TABLE identity_facts (
	client     TEXT NOT NULL,
	source     TEXT NOT NULL,
	ref        TEXT NOT NULL,
	kind       TEXT NOT NULL,
	value      TEXT NOT NULL,
	evidence   TEXT NOT NULL,
	seen       INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (client, source, ref, kind, value)
) STRICT, WITHOUT ROWID;
CREATE TABLE identity_decisions (
	client TEXT NOT NULL,
	a      TEXT NOT NULL,
	b      TEXT NOT NULL,
	merge  INTEGER NOT NULL,
	who    TEXT NOT NULL,
	why    TEXT NOT NULL,
	at     INTEGER NOT NULL,
	PRIMARY KEY (client, a, b)
) STRICT, WITHOUT ROWID;
CREATE TABLE identity_versions (client TEXT PRIMARY KEY, version INTEGER NOT NULL) STRICT;
ALTER TABLE aliases ADD COLUMN stage TEXT NOT NULL DEFAULT '';
ALTER TABLE aliases ADD COLUMN confidence REAL NOT NULL DEFAULT 1;
ALTER TABLE aliases ADD COLUMN evidence TEXT NOT NULL DEFAULT '[]';
`,
	// 9: what the sources say about one person's refs (GET …/aliases).
	`CREATE INDEX identity_facts_ref ON identity_facts (client, ref);`,
	// 10: a document's content (raw, normalized) apart from its state row.
	// SQLite rewrites a row whole when it changes, overflow pages and all:
	// each claim, transition and lease of a 16 KB Jira issue wrote its
	// content again (BENCHMARKS.md, twenty-sixth round).
	`
CREATE TABLE document_bodies (
	id         TEXT PRIMARY KEY,
	raw        BLOB,
	normalized TEXT NOT NULL
) STRICT;
INSERT INTO document_bodies (id, raw, normalized) SELECT id, raw, normalized FROM documents ORDER BY rowid;
ALTER TABLE documents DROP COLUMN raw;
ALTER TABLE documents DROP COLUMN normalized;
`,
	// 11: each client's own encoder.
	`
CREATE TABLE encoders (
	client     TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	model      BLOB NOT NULL,
	items      INTEGER NOT NULL,
	trained_at INTEGER NOT NULL
) STRICT;
`,
	// 12: an encoder's replay, pending until it has finished; the client's
	// documents when it was trained.
	`
ALTER TABLE encoders ADD COLUMN replay_pending INTEGER NOT NULL DEFAULT 0;
ALTER TABLE encoders ADD COLUMN documents INTEGER NOT NULL DEFAULT 0;
`,
	// 13: events indexed by their origin, the row number of the task or
	// document they are about, instead of by its random ID (sqlInsertEvent);
	// those of other aggregates keep the index by ID.
	`
ALTER TABLE events ADD COLUMN origin INTEGER;
UPDATE events SET origin = CASE aggregate
	WHEN 'task' THEN (SELECT rowid FROM tasks WHERE id = events.aggregate_id)
	WHEN 'document' THEN (SELECT rowid FROM documents WHERE id = events.aggregate_id) END
WHERE aggregate IN ('task', 'document');
DROP INDEX events_aggregate;
CREATE INDEX events_origin ON events (aggregate, origin, seq);
CREATE INDEX events_aggregate ON events (aggregate_id, seq) WHERE origin IS NULL;
`,
	// 14: a source's identity facts in one row (identity_sources, the
	// facts as encodeFacts writes them) and the refs they name in
	// identity_refs, instead of a row a fact indexed by ref
	// (PutIdentityFactSets).
	`
CREATE TABLE identity_sources (
	client     TEXT NOT NULL,
	source     TEXT NOT NULL,
	facts      TEXT NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (client, source)
) STRICT;
CREATE TABLE identity_refs (
	client TEXT NOT NULL,
	ref    TEXT NOT NULL,
	source TEXT NOT NULL,
	PRIMARY KEY (client, ref, source)
) STRICT, WITHOUT ROWID;
INSERT INTO identity_sources (client, source, facts, updated_at)
	SELECT client, source, json_group_array(field.value ORDER BY f.ref, f.kind, f.value, field.key), max(f.updated_at)
	FROM identity_facts f, json_each(json_array(f.ref, f.kind, f.value, f.evidence, CAST(f.seen AS TEXT))) field
	GROUP BY client, source;
INSERT INTO identity_refs (client, ref, source) SELECT DISTINCT client, ref, source FROM identity_facts;
DROP TABLE identity_facts;
`,
	// 15: no index of tasks or documents by (client, state): no query
	// plan used them (a client's listing filtered by state walks
	// tasks_list or documents_list for its order), and every claim and
	// transition moved an entry in each.
	`
DROP INDEX tasks_client;
DROP INDEX documents_client;
`,
}
