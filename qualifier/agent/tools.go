package agent

import (
	"regexp"

	"github.com/jervis-dev/jervis/internal/llmtools"
	"github.com/jervis-dev/jervis/kb"
)

var edgeType = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

var toolSpecs = []llmtools.Spec{
	{Name: "storeChunk", Desc: "Store a note worth keeping about the document.", Params: []llmtools.Param{
		{Name: "text", Type: "string", Desc: "the note", Required: true, MaxLen: 4000}}},
	{Name: "searchHybrid", Desc: "Search the knowledge base (keywords and meaning).", Params: []llmtools.Param{
		{Name: "query", Type: "string", Desc: "what to look for", Required: true, MaxLen: 500},
		{Name: "limit", Type: "integer", Desc: "passages, 1-10"}}},
	{Name: "indexDocument", Desc: "Store a derived document (for example a decision record) linked to this one.", Params: []llmtools.Param{
		{Name: "title", Type: "string", Desc: "title", Required: true, MaxLen: 200},
		{Name: "content", Type: "string", Desc: "text", Required: true, MaxLen: 8000}}},
	{Name: "createNodeWithRagLinks", Desc: "Create an entity the prose mentions, with the sentence that mentions it.", Params: []llmtools.Param{
		{Name: "key", Type: "string", Desc: "ref namespace:value", Required: true, MaxLen: 300, Check: kb.CheckRef},
		{Name: "text", Type: "string", Desc: "the sentence of the document that mentions it", Required: true, MaxLen: 2000}}},
	{Name: "createRelationship", Desc: "Relate two refs; evidence is the exact sentence of the document that states it.", Params: []llmtools.Param{
		{Name: "from", Type: "string", Desc: "ref namespace:value", Required: true, MaxLen: 300, Check: kb.CheckRef},
		{Name: "type", Type: "string", Desc: "relation type, e.g. owns, blocks, decided", Required: true, MaxLen: 64, Pattern: edgeType},
		{Name: "to", Type: "string", Desc: "ref namespace:value", Required: true, MaxLen: 300, Check: kb.CheckRef},
		{Name: "evidence", Type: "string", Desc: "exact sentence from the document", Required: true, MaxLen: 2000}}},
	{Name: "routeTask", Desc: "Decide what happens to the document; call once, last.", Params: []llmtools.Param{
		{Name: "decision", Type: "string", Desc: "DONE or READY_FOR_GPU", Required: true, Enum: []string{"DONE", "READY_FOR_GPU"}},
		{Name: "reason", Type: "string", Desc: "why, in one sentence", Required: true, MaxLen: 500},
		{Name: "summary", Type: "string", Desc: "what the document says and asks, for whoever acts on it", MaxLen: 2000}}},
}
