// Command pause is the pod sandbox's process for the test node (tests/controlplane/node.py):
// it holds the pod's namespaces open until it is told to stop, as registry.k8s.io/pause does.
// It is built here, from this module, because the test node pulls no image from a registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
