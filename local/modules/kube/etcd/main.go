// etcd's own main (go.etcd.io/etcd/v3 main.go) over the server module that
// k8s.io/kubernetes already requires, so etcd needs no module of its own.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
