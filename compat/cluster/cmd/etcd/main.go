// etcd, the server version k8s.io/kubernetes pins (go.sum), for the API server's storage.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
