package weaviate_test

import (
	"context"
	"net"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/weaviate/weaviate/grpc/generated/protocol/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/jervis-dev/jervis/kb/rag"
	"github.com/jervis-dev/jervis/kb/rag/weaviate"
)

// batchCounter is a gRPC Weaviate service that counts the batches it is
// sent and answers each with its errors.
type batchCounter struct {
	pb.UnimplementedWeaviateServer
	batches atomic.Int64
	errors  atomic.Pointer[[]*pb.BatchObjectsReply_BatchError]
}

func (b *batchCounter) BatchObjects(context.Context, *pb.BatchObjectsRequest) (*pb.BatchObjectsReply, error) {
	b.batches.Add(1)
	var errs []*pb.BatchObjectsReply_BatchError
	if p := b.errors.Load(); p != nil {
		errs = *p
	}
	return &pb.BatchObjectsReply{Errors: errs}, nil
}

// serve serves b (and the standard health service) on a loopback port,
// with creds; it returns the address.
func (b *batchCounter) serve(t *testing.T, opts ...grpc.ServerOption) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	pb.RegisterWeaviateServer(srv, b)
	grpc_health_v1.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// An object the server refuses fails the batch, naming the object by its
// UUID and saying the server's reason (Weaviate answers a batch whose
// objects failed without a gRPC error, each failure by its index).
func TestGRPCBatchErrorsNameTheObject(t *testing.T) {
	counter := &batchCounter{}
	counter.errors.Store(&[]*pb.BatchObjectsReply_BatchError{{Index: 1, Error: "vector lengths don't match"}})
	addr := counter.serve(t)
	s, err := weaviate.Open(weaviate.Config{URL: "http://127.0.0.1:1", GRPC: addr, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.BatchOverGRPC(t.Context(), "acme", rag.Chunk{ID: "c1", Vector: []float32{1, 0}}, rag.Chunk{ID: "c2", Vector: []float32{0, 1}})
	if err == nil || !regexp.MustCompile(`upsert [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}: vector lengths don't match$`).MatchString(err.Error()) {
		t.Fatalf("batch: %v, want the second object's UUID and the server's reason", err)
	}
	counter.errors.Store(&[]*pb.BatchObjectsReply_BatchError{{Index: 7, Error: "shard not ready"}}) // an index out of the batch
	if err := s.BatchOverGRPC(t.Context(), "acme", rag.Chunk{ID: "c1", Vector: []float32{1, 0}}); err == nil || !strings.Contains(err.Error(), "shard not ready") {
		t.Fatalf("batch: %v, want the server's reason", err)
	}
}

// With an https URL, batches over gRPC verify the server's certificate, as
// REST does: a server whose certificate no root vouches for (a self-signed
// one) never receives a chunk, and the error says why. The Weaviate
// client's own gRPC connection skipped this check, and was never closed.
func TestGRPCBatchesVerifyTheCertificate(t *testing.T) {
	self := httptest.NewTLSServer(nil) // for its self-signed certificate
	self.Close()
	counter := &batchCounter{}
	addr := counter.serve(t, grpc.Creds(credentials.NewServerTLSFromCert(&self.TLS.Certificates[0])))

	s, err := weaviate.Open(weaviate.Config{URL: "https://127.0.0.1:1", GRPC: addr, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = s.BatchOverGRPC(t.Context(), "acme", rag.Chunk{ID: "c1", Text: "secret text", SourceURN: "doc:1", Vector: []float32{1, 0}})
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("batch to an unverified server: %v, want a certificate error", err)
	}
	if n := counter.batches.Load(); n != 0 {
		t.Fatalf("the server received %d batches", n)
	}
	// Close closes the connection the batches go on.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.BatchOverGRPC(t.Context(), "acme", rag.Chunk{ID: "c1", Vector: []float32{1, 0}}); err == nil || !strings.Contains(err.Error(), "closing") {
		t.Fatalf("batch after Close: %v, want the connection closing", err)
	}
}
