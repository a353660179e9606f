package main

import (
	"net"
	"testing"
)

func TestUIURL(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4318}, "http://127.0.0.1:4318/"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 80}, "http://127.0.0.1:80/"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 9}, "http://127.0.0.1:9/"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 9}, "http://[::1]:9/"},
		{&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 4318}, "http://10.1.2.3:4318/"},
	} {
		if got := uiURL(tc.addr); got != tc.want {
			t.Errorf("uiURL(%v) = %s, want %s", tc.addr, got, tc.want)
		}
	}
}
