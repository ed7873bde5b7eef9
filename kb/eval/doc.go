// Package eval measures the knowledge base built from real corpora against
// the labels the data carries itself, and against a textbook peer computed
// in the same run: nothing lost between the files and the store
// (completeness), email threads, Jira issue links and commit → issue keys
// recovered as edges (structure recall), duplicate issues found by search
// beside a textbook BM25 (duplicate finding), node types nobody asked for
// (junk), and what the run cost.
//
// Truth reads the labels from the raw files with parsing of its own (JSON,
// mail headers, Git objects), never through the pipeline's parsers, and
// strips from the data what search is measured on (Jira Duplicate links),
// so the graph cannot give the answer away. Measure reads the pipeline's
// state after a run; Report.Check holds it to Floors. `jervis eval` wires
// the pipeline around it.
package eval
