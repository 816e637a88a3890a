package proxy_test

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/weftmesh/weft/apis/proxy/destination"
	proxynet "github.com/weftmesh/weft/apis/proxy/net"
)

// Example builds the first message a Destination server sends for a service
// with one meshed endpoint, and reads it back as a proxy would.
func Example() {
	update := &destination.Update{Update: &destination.Update_Add{Add: &destination.WeightedAddrSet{
		Addrs: []*destination.WeightedAddr{{
			Addr: &proxynet.TcpAddress{
				Ip:   &proxynet.IPAddress{Ip: &proxynet.IPAddress_Ipv4{Ipv4: 0x0a010203}}, // 10.1.2.3
				Port: 8080,
			},
			Weight: 10000,
			TlsIdentity: &destination.TlsIdentity{Strategy: &destination.TlsIdentity_DnsLikeIdentity_{
				DnsLikeIdentity: &destination.TlsIdentity_DnsLikeIdentity{
					Name: "web.shop.serviceaccount.identity.weft.cluster.local",
				},
			}},
			ProtocolHint: &destination.ProtocolHint{Protocol: &destination.ProtocolHint_H2_{H2: &destination.ProtocolHint_H2{}}},
		}},
	}}}

	b, err := proto.Marshal(update)
	if err != nil {
		fmt.Println(err)
		return
	}

	var got destination.Update
	if err := proto.Unmarshal(b, &got); err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range got.GetAdd().GetAddrs() {
		ip := a.GetAddr().GetIp().GetIpv4()
		fmt.Printf("%d.%d.%d.%d:%d identity=%s h2=%t\n",
			byte(ip>>24), byte(ip>>16), byte(ip>>8), byte(ip), a.GetAddr().GetPort(),
			a.GetTlsIdentity().GetDnsLikeIdentity().GetName(),
			a.GetProtocolHint().GetH2() != nil)
	}
	// Output:
	// 10.1.2.3:8080 identity=web.shop.serviceaccount.identity.weft.cluster.local h2=true
}
