// Command mcclient is the memcached client of `make demo`: it stores keys in a
// set of memcached servers the way applications use a memcached cluster, each key
// on the one server the client's hash picks, then reads every key back and
// reports where it lives.
//
//	mcclient -servers 198.18.0.11:11211,198.18.0.12:11211 -keys 6 -prefix wordpress
//
// It exits non-zero unless every key reads back with the value it stored.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mcclient:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("mcclient", flag.ContinueOnError)
	servers := fs.String("servers", "", "comma-separated host:port of the memcached servers")
	keys := fs.Int("keys", 6, "how many keys to store and read back (1..1000)")
	prefix := fs.String("prefix", "demo", "prefix of the keys")
	timeout := fs.Duration("timeout", 2*time.Second, "timeout of each request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *keys < 1 || *keys > 1000 {
		return fmt.Errorf("-keys=%d must be between 1 and 1000", *keys)
	}
	addrs := strings.Split(*servers, ",")
	for _, a := range addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("-servers: %q is not host:port", a)
		}
	}
	var sel memcache.ServerList
	if err := sel.SetServers(addrs...); err != nil {
		return err
	}
	client := memcache.NewFromSelector(&sel)
	client.Timeout = *timeout
	defer client.Close()

	perServer := map[string]int{}
	for i := 1; i <= *keys; i++ {
		key := fmt.Sprintf("%s:key:%d", *prefix, i)
		value := fmt.Sprintf("value %d stored at %s", i, time.Now().UTC().Format(time.RFC3339))
		server, err := sel.PickServer(key)
		if err != nil {
			return err
		}
		if err := client.Set(&memcache.Item{Key: key, Value: []byte(value)}); err != nil {
			return fmt.Errorf("set %s on %s: %v", key, server, err)
		}
		it, err := client.Get(key)
		if err != nil {
			return fmt.Errorf("get %s from %s: %v", key, server, err)
		}
		if string(it.Value) != value {
			return fmt.Errorf("get %s from %s = %q, want %q", key, server, it.Value, value)
		}
		perServer[server.String()]++
		fmt.Printf("set+get %-16s on %-18s %q\n", key, server, it.Value)
	}
	for _, a := range addrs {
		fmt.Printf("%s holds %d of the %d keys\n", a, perServer[a], *keys)
	}
	return nil
}
