package linksafety

import (
	"encoding/binary"
	"net/netip"
)

// special is a range of an IANA special-purpose address registry.
type special struct {
	prefix netip.Prefix
	name   string
	global bool // "Globally Reachable" in the registry
}

func sp(prefix, name string, global bool) special {
	return special{netip.MustParsePrefix(prefix), name, global}
}

// specialV4 is the IANA IPv4 Special-Purpose Address Registry
// (https://www.iana.org/assignments/iana-ipv4-special-registry/, as of
// 2025), plus multicast (the IPv4 Multicast Address Space Registry) and the
// deprecated 6to4 relay anycast range (RFC 7526). More specific entries
// come first: the first that contains an address decides.
var specialV4 = []special{
	sp("192.0.0.9/32", "Port Control Protocol anycast", true),
	sp("192.0.0.10/32", "Traversal Using Relays around NAT anycast", true),
	sp("192.0.0.8/32", "IPv4 dummy address", false),
	sp("192.0.0.170/31", "NAT64/DNS64 discovery", false),
	sp("192.0.0.0/29", "IPv4 service continuity prefix", false),
	sp("192.0.0.0/24", "IETF protocol assignments", false),
	sp("0.0.0.0/8", `"this network"`, false),
	sp("10.0.0.0/8", "private-use", false),
	sp("100.64.0.0/10", "shared address space (CGNAT)", false),
	sp("127.0.0.0/8", "loopback", false),
	sp("169.254.0.0/16", "link-local (cloud metadata lives here)", false),
	sp("172.16.0.0/12", "private-use", false),
	sp("192.0.2.0/24", "documentation (TEST-NET-1)", false),
	sp("192.88.99.0/24", "deprecated 6to4 relay anycast", false),
	sp("192.168.0.0/16", "private-use", false),
	sp("198.18.0.0/15", "benchmarking", false),
	sp("198.51.100.0/24", "documentation (TEST-NET-2)", false),
	sp("203.0.113.0/24", "documentation (TEST-NET-3)", false),
	sp("224.0.0.0/4", "multicast", false),
	sp("255.255.255.255/32", "limited broadcast", false),
	sp("240.0.0.0/4", "reserved", false),
}

// specialV6 is the IANA IPv6 Special-Purpose Address Registry
// (https://www.iana.org/assignments/iana-ipv6-special-registry/, as of
// 2025), plus the deprecated site-local (RFC 3879) and IPv4-compatible
// (RFC 4291) ranges and multicast. The ranges that embed an IPv4 address
// (IPv4-mapped, IPv4-compatible, NAT64, 6to4, Teredo) are unwrapped before
// this table is read (embeddedV4). Anything outside global unicast
// (2000::/3) is refused as well.
var specialV6 = []special{
	sp("::1/128", "loopback", false),
	sp("::/128", "unspecified", false),
	sp("64:ff9b:1::/48", "IPv4/IPv6 translation, local use", false),
	sp("100::/64", "discard-only", false),
	sp("100:0:0:1::/64", "dummy IPv6 prefix", false),
	sp("2001:1::1/128", "Port Control Protocol anycast", true),
	sp("2001:1::2/128", "Traversal Using Relays around NAT anycast", true),
	sp("2001:1::3/128", "DNS-SD service registration anycast", true),
	sp("2001:3::/32", "AMT", true),
	sp("2001:4:112::/48", "AS112-v6", true),
	sp("2001:20::/28", "ORCHIDv2", true),
	sp("2001:30::/28", "drone remote ID", true),
	sp("2001:2::/48", "benchmarking", false),
	sp("2001::/23", "IETF protocol assignments", false),
	sp("2001:db8::/32", "documentation", false),
	sp("3fff::/20", "documentation", false),
	sp("5f00::/16", "segment routing (SRv6) SIDs", false),
	sp("fc00::/7", "unique-local", false),
	sp("fe80::/10", "link-local", false),
	sp("fec0::/10", "site-local (deprecated)", false),
	sp("ff00::/8", "multicast", false),
}

var (
	globalUnicast = netip.MustParsePrefix("2000::/3")
	ipv4Compat    = netip.MustParsePrefix("::/96")
	nat64         = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour     = netip.MustParsePrefix("2002::/16")
	teredo        = netip.MustParsePrefix("2001::/32")
)

// embeddedV4 returns the IPv4 addresses an IPv6 address carries, and the
// mechanism: IPv4-mapped and IPv4-compatible (the last 32 bits), NAT64's
// well-known prefix (the last 32 bits), 6to4 (bits 16–47), Teredo (the
// server at bits 32–63, the client in the last 32 bits, inverted).
func embeddedV4(a netip.Addr) ([]netip.Addr, string) {
	b := a.As16()
	v4 := func(off int, invert bool) netip.Addr {
		x := binary.BigEndian.Uint32(b[off:])
		if invert {
			x = ^x
		}
		var o [4]byte
		binary.BigEndian.PutUint32(o[:], x)
		return netip.AddrFrom4(o)
	}
	switch {
	case a.Is4In6():
		return []netip.Addr{v4(12, false)}, "IPv4-mapped"
	case ipv4Compat.Contains(a) && a != netip.IPv6Unspecified() && a != netip.IPv6Loopback():
		return []netip.Addr{v4(12, false)}, "IPv4-compatible"
	case nat64.Contains(a):
		return []netip.Addr{v4(12, false)}, "NAT64"
	case sixToFour.Contains(a):
		return []netip.Addr{v4(2, false)}, "6to4"
	case teredo.Contains(a):
		return []netip.Addr{v4(4, false), v4(12, true)}, "Teredo"
	}
	return nil, ""
}

// nonGlobal says why addr is not globally reachable ("" when it is), by
// the IANA special-purpose registries, after unwrapping the IPv4 addresses
// an IPv6 address carries: a NAT64 address of the cloud metadata service
// (64:ff9b::a9fe:a9fe) is link-local.
func nonGlobal(addr netip.Addr) string {
	addr = addr.WithZone("")
	if addr.Is6() {
		if v4s, how := embeddedV4(addr); how != "" {
			for _, v4 := range v4s {
				if why := nonGlobal(v4); why != "" {
					return why + " (" + v4.String() + ", embedded " + how + ")"
				}
			}
			return "" // a public IPv4 address, directly or through a translator
		}
	}
	table := specialV4
	if addr.Is6() {
		table = specialV6
	}
	for _, s := range table {
		if s.prefix.Contains(addr) {
			if s.global {
				return ""
			}
			return s.name + " address"
		}
	}
	if addr.Is6() && !globalUnicast.Contains(addr) {
		return "IPv6 address outside global unicast (2000::/3)"
	}
	return ""
}
