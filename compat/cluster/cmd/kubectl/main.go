// kubectl of the k8s.io/kubernetes version go.mod pins, for the diagnose stage's plugin checks
// (`kubectl plugin list`, `kubectl meshlife diagnose pod/NAME`): the same main as the project's
// cmd/kubectl/kubectl.go (see cmd/kube-apiserver for why it is copied).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"

	// Import to initialize client auth plugins.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

func main() {
	// The verbosity is set before the command is built, as kubectl's own main does, so that
	// klog works while plugins and .kuberc are handled.
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) // nolint:errcheck
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
