package weaviate_test

import (
	"context"
	"net"
	"net/http/httptest"
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
// sent (and answers each with no errors).
type batchCounter struct {
	pb.UnimplementedWeaviateServer
	batches atomic.Int64
}

func (b *batchCounter) BatchObjects(context.Context, *pb.BatchObjectsRequest) (*pb.BatchObjectsReply, error) {
	b.batches.Add(1)
	return &pb.BatchObjectsReply{}, nil
}

// With an https URL, batches over gRPC verify the server's certificate, as
// REST does: a server whose certificate no root vouches for (a self-signed
// one) never receives a chunk, and the error says why. The Weaviate
// client's own gRPC connection skipped this check, and was never closed.
func TestGRPCBatchesVerifyTheCertificate(t *testing.T) {
	self := httptest.NewTLSServer(nil) // for its self-signed certificate
	self.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewServerTLSFromCert(&self.TLS.Certificates[0])))
	counter := &batchCounter{}
	pb.RegisterWeaviateServer(srv, counter)
	grpc_health_v1.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()

	s, err := weaviate.Open(weaviate.Config{URL: "https://127.0.0.1:1", GRPC: lis.Addr().String(), Timeout: 5 * time.Second})
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
