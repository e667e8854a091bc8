package node

// Crash makes the process vanish from the network as a killed process
// does: its gRPC server closes every connection at once, calls in flight
// included, without a drain or a NOT_SERVING first.
func (n *Node) Crash() {
	if n.grpcServer != nil {
		n.grpcServer.Stop()
	}
}
