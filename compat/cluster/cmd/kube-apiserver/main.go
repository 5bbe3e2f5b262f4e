// kube-apiserver of the k8s.io/kubernetes version go.mod pins: the same main as the project's
// cmd/kube-apiserver/apiserver.go, which `go install` cannot build from the module proxy (its
// staging modules are replaced by paths; this module replaces them by their published versions).
package main

import (
	"os"
	_ "time/tzdata" // for timeZone support in CronJob

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
