package sidecar

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Cluster is the membership that the discovery endpoint serves: the
// version and the nodes of ElastiCache's reply to "config get cluster".
// Its text (Text, ParseCluster) is exactly the data of that reply, the
// version on a line of its own and the nodes, separated by spaces, on
// the next, each line ending in a bare \n; the operator writes it into the
// discovery ConfigMap and the sidecar serves it as it reads it.
type Cluster struct {
	// Version grows by one with every change of Nodes, and never goes
	// back: clients that keep the highest version they saw ignore a
	// lower one.
	Version int64
	// Nodes are the memcached servers, in a stable order.
	Nodes []Node
}

// Node is one memcached server of a Cluster.
type Node struct {
	// Host is the name clients connect to. In the pods it is the pod's IP,
	// which resolves everywhere, since a Deployment's pods have no DNS
	// name of their own.
	Host string
	// IP is the server's IPv4 or IPv6 address.
	IP netip.Addr
	// Port is memcached's port.
	Port int
}

// String is the node as ElastiCache lists it: host|ip|port.
func (n Node) String() string {
	return n.Host + "|" + n.IP.String() + "|" + strconv.Itoa(n.Port)
}

// Text returns c as the data of the reply to "config get cluster".
func (c Cluster) Text() string {
	nodes := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		nodes[i] = n.String()
	}
	return strconv.FormatInt(c.Version, 10) + "\n" + strings.Join(nodes, " ") + "\n"
}

// ParseCluster reads the text of a Cluster, as Text writes it. It refuses
// anything else, so that the sidecar never serves, and the operator never
// goes on from, a file that someone edited into something clients could
// not read.
func ParseCluster(text string) (Cluster, error) {
	lines := strings.Split(text, "\n")
	if len(lines) != 3 || lines[2] != "" {
		return Cluster{}, errors.New("the cluster file must be two lines, each ending in \\n: the version, then the nodes")
	}
	version, err := strconv.ParseInt(lines[0], 10, 64)
	if err != nil || version < 1 {
		return Cluster{}, fmt.Errorf("the cluster file's version %q is not a whole number from 1", lines[0])
	}
	c := Cluster{Version: version}
	if lines[1] == "" {
		return c, nil
	}
	for _, entry := range strings.Split(lines[1], " ") {
		n, err := parseNode(entry)
		if err != nil {
			return Cluster{}, fmt.Errorf("the cluster file's node %q: %v", entry, err)
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c, nil
}

// parseNode reads one host|ip|port.
func parseNode(entry string) (Node, error) {
	parts := strings.Split(entry, "|")
	if len(parts) != 3 || parts[0] == "" || strings.ContainsAny(parts[0], "\r\t") {
		return Node{}, errors.New("not host|ip|port")
	}
	ip, err := netip.ParseAddr(parts[1])
	if err != nil {
		return Node{}, err
	}
	port, err := strconv.Atoi(parts[2])
	if err != nil || port < 1 || port > 65535 {
		return Node{}, fmt.Errorf("port %q is not from 1 to 65535", parts[2])
	}
	return Node{Host: parts[0], IP: ip, Port: port}, nil
}

// SameNodes reports whether a and b list the same nodes in the same order.
func SameNodes(a, b []Node) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
