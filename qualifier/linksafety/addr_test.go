package linksafety

import (
	"net/netip"
	"strings"
	"testing"
)

// addressCases are addresses of every class the IANA special-purpose
// registries say is not globally reachable, their forms embedded in IPv6,
// and public addresses that must stay allowed ("" = allowed).
var addressCases = []struct{ addr, refused string }{
	// IPv4 special-purpose registry
	{"0.0.0.0", "this network"},
	{"0.1.2.3", "this network"},
	{"10.0.0.1", "private-use"},
	{"100.64.0.1", "shared address space"},
	{"100.127.255.254", "shared address space"},
	{"127.0.0.1", "loopback"},
	{"127.8.8.8", "loopback"},
	{"169.254.169.254", "link-local"},
	{"172.16.0.1", "private-use"},
	{"172.31.255.255", "private-use"},
	{"192.0.0.1", "IPv4 service continuity"},
	{"192.0.0.8", "dummy"},
	{"192.0.0.170", "NAT64/DNS64 discovery"},
	{"192.0.0.200", "IETF protocol assignments"},
	{"192.0.2.10", "documentation"},
	{"192.88.99.1", "6to4 relay anycast"},
	{"192.168.1.1", "private-use"},
	{"198.18.0.1", "benchmarking"},
	{"198.19.255.255", "benchmarking"},
	{"198.51.100.7", "documentation"},
	{"203.0.113.9", "documentation"},
	{"224.0.0.1", "multicast"},
	{"239.255.255.250", "multicast"},
	{"240.0.0.1", "reserved"},
	{"255.255.255.255", "limited broadcast"},
	// IPv6 special-purpose registry and more
	{"::", "unspecified"},
	{"::1", "loopback"},
	{"fe80::1", "link-local"},
	{"fe80::1%eth0", "link-local"},
	{"fc00::1", "unique-local"},
	{"fd12:3456::1", "unique-local"},
	{"fec0::1", "site-local"},
	{"ff02::1", "multicast"},
	{"100::1", "discard-only"},
	{"2001:db8::1", "documentation"},
	{"3fff::1", "documentation"},
	{"2001:2::1", "benchmarking"},
	{"2001:10::1", "IETF protocol assignments"},
	{"5f00::1", "segment routing"},
	{"64:ff9b:1::a00:1", "local use"},
	{"1::1", "outside global unicast"},
	// IPv4 embedded in IPv6
	{"::ffff:127.0.0.1", "loopback"},
	{"::ffff:10.0.0.1", "private-use"},
	{"::ffff:169.254.169.254", "link-local"},
	{"::10.0.0.1", "private-use"},                  // IPv4-compatible
	{"::169.254.169.254", "link-local"},            // IPv4-compatible
	{"64:ff9b::a9fe:a9fe", "link-local"},           // NAT64 of the metadata service
	{"64:ff9b::7f00:1", "loopback"},                // NAT64 of 127.0.0.1
	{"64:ff9b::c0a8:101", "private-use"},           // NAT64 of 192.168.1.1
	{"2002:a00:1::1", "private-use"},               // 6to4 of 10.0.0.1
	{"2002:a9fe:a9fe::1", "link-local"},            // 6to4 of the metadata service
	{"2002:7f00:1::", "loopback"},                  // 6to4 of 127.0.0.1
	{"2001:0:a00:1::1", "private-use"},             // Teredo, server 10.0.0.1
	{"2001:0:4136:e378::f5ff:fffe", "private-use"}, // Teredo, server public, client 10.0.0.1 (inverted)
	// public, allowed
	{"8.8.8.8", ""},
	{"1.1.1.1", ""},
	{"93.184.216.34", ""},
	{"192.0.0.9", ""},                 // PCP anycast, globally reachable
	{"192.31.196.1", ""},              // AS112
	{"2606:4700:4700::1111", ""},      // public IPv6
	{"2001:4860:4860::8888", ""},      // public IPv6
	{"2001:4:112::1", ""},             // AS112-v6
	{"64:ff9b::808:808", ""},          // NAT64 of 8.8.8.8
	{"::ffff:8.8.8.8", ""},            // IPv4-mapped public
	{"2002:808:808::1", ""},           // 6to4 of 8.8.8.8
	{"2001:0:808:808::f7f7:f7f7", ""}, // Teredo, server 8.8.8.8, client 8.8.8.8
}

func TestAddressPolicy(t *testing.T) {
	t.Parallel()
	if len(addressCases) < 40 {
		t.Fatalf("only %d addresses", len(addressCases))
	}
	f := &Fetcher{}
	for _, tc := range addressCases {
		a, err := netip.ParseAddr(tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		got := f.refuse(a)
		switch {
		case tc.refused == "" && got != "":
			t.Errorf("%s refused (%s), want allowed", tc.addr, got)
		case tc.refused != "" && !strings.Contains(got, tc.refused):
			t.Errorf("%s: %q, want refused as %q", tc.addr, got, tc.refused)
		}
	}
	// Loopback only when the Fetcher allows it (tests), nothing else.
	open := &Fetcher{AllowLoopback: true}
	if open.refuse(netip.MustParseAddr("127.0.0.1")) != "" || open.refuse(netip.MustParseAddr("::1")) != "" || open.refuse(netip.MustParseAddr("10.0.0.1")) == "" {
		t.Fatal("AllowLoopback")
	}
}
