package main

import (
	"bufio"
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The node's fixed facts. One node per machine at a time: the bridge, the kubelet's port and
// kube-proxy's ports are host-wide (../shared/docs/node.md).
const (
	nodeName      = "localhost"
	podSubnet     = "10.244.0.0/16"
	bridgeName    = "cni0"
	bridgeGateway = "10.244.0.1"
	guardChain    = "CNI-MESHLIFE-GUARD"
	kubeletPort   = 10250
	pauseImageRef = "registry.k8s.io/pause:3.10"
)

// kernelSettings are the sysctls the kubelet sets at start and the ones the node needs
// (routing to a ClusterIP's pod on the same bridge); their values are put back at stop.
var kernelSettings = []string{"kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory", "net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables"}

// nodeSettings are what the node sets: a pod's packet to a ClusterIP is DNATed to another pod
// on the same bridge and routed back out, which needs both.
var nodeSettings = map[string]string{"net/ipv4/ip_forward": "1", "net/bridge/bridge-nf-call-iptables": "1"}

// node is a kubelet with containerd, runc and the CNI bridge plugin, the controller manager,
// the scheduler and kube-proxy, run against the harness's API server on this machine, so that
// Deployments, ReplicaSets, Jobs and EndpointSlices behave as in any cluster. Everything it
// changes on the host (mounts, the bridge, iptables chains, cgroups, sysctls, runtime files)
// is undone by teardown, which the harness runs on every way out, a signal included.
type node struct {
	h                   *harness
	run, cfg            string
	containerdSocket    string
	containerd, kubelet *process
	controllers, sched  *process
	proxy               *process
	savedSettings       map[string]string
	hostFilesBefore     map[string]bool
	hostRootsMade       []string
	torn                bool
	kubeletVersion      string
}

// hostDirectories are the host-wide folders the runtime and kubelet write into whatever their
// configuration says; only what appeared during the run is removed.
var hostDirectories = []string{"/var/lib/cni/results", "/var/lib/cni/networks", "/run/containerd/s", "/var/log/containers", "/var/log/pods", "/var/lib/kubelet/device-plugins"}

// hostRoots hold the folders above: the ones the run made are removed whole.
var hostRoots = []string{"/var/lib/cni", "/run/containerd", "/var/log/containers", "/var/log/pods", "/var/lib/kubelet"}

func startNode(ctx context.Context, h *harness) (*node, error) {
	n := &node{h: h, run: filepath.Join(h.dir, "node"), savedSettings: map[string]string{}, hostFilesBefore: map[string]bool{}}
	n.cfg = filepath.Join(n.run, "config")
	n.containerdSocket = filepath.Join(n.run, "containerd.sock")
	if err := n.preflight(); err != nil {
		return nil, err
	}
	for _, dir := range []string{n.cfg, filepath.Join(n.cfg, "cni"), filepath.Join(n.run, "pod-logs")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	for _, setting := range kernelSettings {
		if value, err := os.ReadFile(filepath.Join("/proc/sys", setting)); err == nil {
			n.savedSettings[setting] = strings.TrimSpace(string(value))
		}
	}
	for _, dir := range hostDirectories {
		entries, _ := os.ReadDir(dir)
		for _, entry := range entries {
			n.hostFilesBefore[filepath.Join(dir, entry.Name())] = true
		}
	}
	for _, root := range hostRoots {
		if !fileExists(root) {
			n.hostRootsMade = append(n.hostRootsMade, root)
		}
	}
	if err := n.writeClaim(); err != nil {
		return nil, err
	}
	// From here on the host is changed: the teardown runs on every way out, and the claim
	// lets the next run undo it when this one is killed before it can.
	h.procs.beforeStop(n.teardown)
	for setting, value := range nodeSettings {
		if _, saved := n.savedSettings[setting]; !saved {
			return nil, fmt.Errorf("/proc/sys/%s is missing (the bridge needs the br_netfilter module loaded)", setting)
		}
		if err := os.WriteFile(filepath.Join("/proc/sys", setting), []byte(value), 0o644); err != nil {
			return nil, fmt.Errorf("setting %s: %w", setting, err)
		}
	}
	if err := n.writeConfigs(); err != nil {
		return nil, err
	}
	if err := n.guardPodTraffic(); err != nil {
		return nil, err
	}
	var err error
	n.containerd, err = h.procs.start("containerd", "containerd", []string{"--config", filepath.Join(n.cfg, "containerd.toml")}, nil)
	if err != nil {
		return nil, err
	}
	if err := waitSocket(ctx, n.containerd, n.containerdSocket, 30*time.Second); err != nil {
		return nil, err
	}
	return n, nil
}

// preflight refuses to start where the node cannot run or another one already does.
func (n *node) preflight() error {
	if os.Geteuid() != 0 {
		return errors.New("the node needs root (mounts, network namespaces, iptables, cgroups)")
	}
	var missing []string
	for _, program := range []string{"containerd", "ctr", "runc", "iptables", "iptables-save", "iptables-restore", "ip"} {
		if _, err := exec.LookPath(program); err != nil {
			missing = append(missing, program)
		}
	}
	for _, plugin := range cniPlugins {
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", plugin)); err != nil {
			missing = append(missing, "/usr/lib/cni/"+plugin)
		}
	}
	if _, err := os.Stat(filepath.Join(n.h.bin, "istio-cni")); err != nil {
		missing = append(missing, filepath.Join(n.h.bin, "istio-cni")+" (compat/cluster/install.sh builds it)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing on this machine: %s (compat/cluster/run.sh installs them from Debian's packages when the stage reality is asked for)", strings.Join(missing, ", "))
	}
	if err := recoverAbandonedNode(n.h); err != nil {
		return err
	}
	if _, err := net.InterfaceByName(bridgeName); err == nil {
		return fmt.Errorf("the bridge %s exists already, and no claim (%s) says which run made it: another node runs on this machine, or one was not cleaned up (ip link del %s)", bridgeName, nodeClaimPath, bridgeName)
	}
	if listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", kubeletPort)); err != nil {
		return fmt.Errorf("port %d (the kubelet's) is taken: another kubelet runs on this machine", kubeletPort)
	} else {
		listener.Close()
	}
	return nil
}

func (n *node) writeConfigs() error {
	cp := n.h.cp
	serving, err := cp.ca.issue(pkix.Name{CommonName: "kubelet"}, loopback, []string{nodeName}, true, false)
	if err != nil {
		return err
	}
	certFile, keyFile, err := serving.write(n.cfg, "kubelet")
	if err != nil {
		return err
	}
	files := map[string]string{
		"containerd.toml": fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
oom_score = 0
[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %[4]q
    # This sandbox drops CAP_SYS_RESOURCE from every process, so runc cannot lower
    # oom_score_adj below 0: containerd's -998 for the pause container kills every sandbox.
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    enable_selinux = false
    disable_apparmor = true
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = %[7]q
      conf_dir = %[5]q
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          BinaryName = "runc"
          Root = %[6]q
`, filepath.Join(n.run, "containerd"), filepath.Join(n.run, "containerd-state"), n.containerdSocket,
			pauseImageRef, filepath.Join(n.cfg, "cni"), filepath.Join(n.run, "runc"), n.cniBin()),
		// istio-cni chained last, as Istio's install-cni chains it into a cluster's CNI
		// (cni/pkg/install): for a pod that istiod injected for the CNI (istio-validation, no
		// istio-init) it installs the redirect in the pod's network namespace before any init
		// container runs; every other pod it leaves alone (cni/pkg/plugin/plugin.go). Its
		// kubeconfig and log are in cni_agent_run_dir, where its node agent would keep them.
		"cni/10-bridge.conflist": fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "meshlife-node", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": %q,
            "ranges": [[{"subnet": "10.244.0.0/24", "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}},
  {"type": "loopback"},
  {"type": "istio-cni", "plugin_log_level": "info", "cni_agent_run_dir": %q,
   "exclude_namespaces": ["kube-system", %q]}]}
`, bridgeName, filepath.Join(n.run, "cni-ipam"), bridgeGateway, n.istioCNIRunDir(), istioNamespace),
		"kubelet.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[1]q}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
containerRuntimeEndpoint: unix://%[2]s
podLogsDir: %[3]q
staticPodPath: ""
address: 127.0.0.1
port: %[4]d
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
tlsCertFile: %[5]q
tlsPrivateKeyFile: %[6]q
resolvConf: /etc/resolv.conf
cgroupsPerQOS: true
enforceNodeAllocatable: []
imageGCHighThresholdPercent: 100
evictionHard: {}
localStorageCapacityIsolation: false
registerNode: true
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
serializeImagePulls: false
shutdownGracePeriod: 0s
featureGates: {%[7]s}
`, cp.caFile, n.containerdSocket, filepath.Join(n.run, "pod-logs"), kubeletPort, certFile, keyFile,
			strings.ReplaceAll(strings.ReplaceAll(restartAllGates, "=", ": "), ",", ", ")),
		"kube-proxy.yaml": fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["%s/32"]
iptables: {localhostNodePorts: false, masqueradeAll: false, syncPeriod: 5s, minSyncPeriod: 0s}
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, cp.adminKC, nodeName, podSubnet, bridgeGateway),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(n.cfg, name), []byte(text), 0o600); err != nil {
			return err
		}
	}
	return n.writeCNIPlugins()
}

// cniPlugins are Debian's plugins the node's network chains, istio-cni aside.
var cniPlugins = []string{"bridge", "host-local", "loopback", "portmap"}

// cniBin is the node's CNI plugin folder: Debian's plugins linked, and istio-cni, so that
// nothing is added to the host's /usr/lib/cni.
func (n *node) cniBin() string { return filepath.Join(n.run, "cni-bin") }

// istioCNIRunDir is istio-cni's cni_agent_run_dir: its kubeconfig, read at every pod's ADD,
// and its log (istio-cni.log, JSON lines), where the stage reads when it installed a redirect.
func (n *node) istioCNIRunDir() string { return filepath.Join(n.run, "istio-cni") }

func (n *node) writeCNIPlugins() error {
	for _, dir := range []string{n.cniBin(), n.istioCNIRunDir()} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	for _, plugin := range cniPlugins {
		if err := os.Symlink(filepath.Join("/usr/lib/cni", plugin), filepath.Join(n.cniBin(), plugin)); err != nil {
			return err
		}
	}
	istioCNI, err := filepath.Abs(filepath.Join(n.h.bin, "istio-cni"))
	if err != nil {
		return err
	}
	if err := os.Symlink(istioCNI, filepath.Join(n.cniBin(), "istio-cni")); err != nil {
		return err
	}
	kubeconfig, err := os.ReadFile(n.h.cp.adminKC)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.istioCNIRunDir(), "istio-cni-kubeconfig"), kubeconfig, 0o600)
}

// guardPodTraffic lets pods reach each other and the host, and nothing beyond: the test
// images must never dial out. It also keeps pod-to-pod traffic flowing where dockerd has set
// FORWARD's policy to DROP (CI starts dockerd for the image test before this stage).
func (n *node) guardPodTraffic() error {
	script := fmt.Sprintf("*filter\n:%[1]s - [0:0]\n-A %[1]s -s %[2]s -d %[2]s -j ACCEPT\n-A %[1]s -s %[2]s -j DROP\n-I FORWARD 1 -j %[1]s\nCOMMIT\n", guardChain, podSubnet)
	return runInput("iptables-restore", script, "--noflush")
}

// importImages loads image archives into the runtime's k8s.io namespace, where the CRI finds
// them (pods use imagePullPolicy: Never; nothing is pulled).
func (n *node) importImages(ctx context.Context, archives ...string) error {
	for _, archive := range archives {
		if err := importImage(ctx, "ctr", n.containerdSocket, archive); err != nil {
			return err
		}
	}
	return nil
}

// startKubernetes starts the kubelet (and waits for its Node to be Ready), then the controller
// manager, the scheduler and kube-proxy.
func (n *node) startKubernetes(ctx context.Context) error {
	cp, bin := n.h.cp, n.h.bin
	var err error
	n.kubelet, err = n.h.procs.start("kubelet", filepath.Join(bin, "kubelet"), []string{
		"--config", filepath.Join(n.cfg, "kubelet.yaml"),
		"--kubeconfig", cp.adminKC,
		"--root-dir", filepath.Join(n.run, "kubelet"),
		"--cert-dir", filepath.Join(n.run, "kubelet-pki"),
		"--hostname-override", nodeName,
		"--v", "2",
	}, nil)
	if err != nil {
		return err
	}
	if err := waitUntil(ctx, 90*time.Second, "the Node "+nodeName+" Ready", func() (bool, error) {
		if n.kubelet.exited() {
			return false, fmt.Errorf("the kubelet exited (%v); its log ends:\n%s", n.kubelet.err, n.kubelet.tail(30))
		}
		got, err := n.h.k.core.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, condition := range got.Status.Conditions {
			if condition.Type == corev1.NodeReady && condition.Status == corev1.ConditionTrue {
				n.kubeletVersion = got.Status.NodeInfo.KubeletVersion
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return err
	}
	n.controllers, err = n.h.procs.start("kube-controller-manager", filepath.Join(bin, "kube-controller-manager"), []string{
		"--kubeconfig", cp.adminKC,
		"--authentication-kubeconfig", cp.adminKC, "--authorization-kubeconfig", cp.adminKC,
		"--use-service-account-credentials",
		"--service-account-private-key-file", filepath.Join(n.h.dir, "sa.key"),
		"--root-ca-file", cp.caFile,
		"--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", "0",
		"--controllers", "*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route,-persistentvolume-binder,-attachdetach,-persistentvolume-expander,-ephemeral-volume,-pvc-protection,-pv-protection",
		"--concurrent-deployment-syncs", "5", "--concurrent-endpoint-syncs", "5",
	}, nil)
	if err != nil {
		return err
	}
	n.sched, err = n.h.procs.start("kube-scheduler", filepath.Join(bin, "kube-scheduler"), []string{
		"--kubeconfig", cp.adminKC,
		"--authentication-kubeconfig", cp.adminKC, "--authorization-kubeconfig", cp.adminKC,
		"--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", "0",
		"--v", "2",
	}, nil)
	if err != nil {
		return err
	}
	n.proxy, err = n.h.procs.start("kube-proxy", filepath.Join(bin, "kube-proxy"), []string{
		"--config", filepath.Join(n.cfg, "kube-proxy.yaml"),
	}, nil)
	if err != nil {
		return err
	}
	// The default ServiceAccount is the controller manager's: no pod is admitted before it.
	return waitUntil(ctx, 60*time.Second, "the default ServiceAccount", func() (bool, error) {
		for _, proc := range []*process{n.controllers, n.sched, n.proxy} {
			if proc.exited() {
				return false, fmt.Errorf("%s exited (%v); its log ends:\n%s", proc.name, proc.err, proc.tail(30))
			}
		}
		_, err := n.h.k.core.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// teardown undoes everything the node changed on the host, in the order that works even when
// the kubelet or containerd were killed with pods running: the Kubernetes processes first, then
// every sandbox through the runtime (CNI DEL, unmounts), the runtime, whatever it left running,
// the mounts deepest first, the bridge, the iptables chains, the sysctls, the runtime's files
// and the cgroups. Each step runs whatever the ones before it did; failures are reported, not
// fatal, so that the next steps still run.
func (n *node) teardown() {
	if n.torn {
		return
	}
	n.torn = true
	var problems []string
	note := func(err error) {
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	for _, proc := range []*process{n.proxy, n.sched, n.controllers, n.kubelet} {
		if proc != nil {
			proc.stop(10 * time.Second)
			n.h.procs.forget(proc)
		}
	}
	if n.containerd != nil && !n.containerd.exited() {
		note(n.removeSandboxes())
		n.containerd.stop(10 * time.Second)
		n.h.procs.forget(n.containerd)
	}
	note(killOwnedProcesses(n.run))
	note(unmountUnder(n.run))
	if _, err := net.InterfaceByName(bridgeName); err == nil {
		note(exec.Command("ip", "link", "delete", bridgeName).Run())
	}
	for _, tool := range []string{"iptables", "ip6tables"} {
		note(removeChains(tool, []string{"KUBE-", "CNI-"}))
	}
	for setting, value := range n.savedSettings {
		note(os.WriteFile(filepath.Join("/proc/sys", setting), []byte(value), 0o644))
	}
	for _, dir := range hostDirectories {
		entries, _ := os.ReadDir(dir)
		for _, entry := range entries {
			path := filepath.Join(dir, entry.Name())
			if !n.hostFilesBefore[path] {
				note(os.RemoveAll(path))
			}
		}
	}
	for _, root := range n.hostRootsMade {
		note(os.RemoveAll(root))
	}
	note(removeCgroups("kubepods"))
	note(releaseClaim())
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "cluster-compat: the node's teardown: %s\n", strings.Join(problems, "; "))
	} else {
		fmt.Println("  node torn down: mounts, bridge, iptables chains, cgroups, sysctls and runtime files as before")
	}
}

// removeSandboxes stops and removes every pod sandbox through the CRI, as the kubelet would:
// the runtime runs CNI DEL and unmounts the sandbox's namespaces.
func (n *node) removeSandboxes() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+n.containerdSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	runtime := criapi.NewRuntimeServiceClient(conn)
	sandboxes, err := runtime.ListPodSandbox(ctx, &criapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("listing sandboxes: %w", err)
	}
	var failed []string
	for _, sandbox := range sandboxes.Items {
		if _, err := runtime.StopPodSandbox(ctx, &criapi.StopPodSandboxRequest{PodSandboxId: sandbox.Id}); err != nil {
			failed = append(failed, sandbox.Metadata.GetName()+": "+err.Error())
			continue
		}
		if _, err := runtime.RemovePodSandbox(ctx, &criapi.RemovePodSandboxRequest{PodSandboxId: sandbox.Id}); err != nil {
			failed = append(failed, sandbox.Metadata.GetName()+": "+err.Error())
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("removing sandboxes: %s", strings.Join(failed, "; "))
	}
	return nil
}

// killOwnedProcesses kills every process whose command line names this node's folder (the
// runtime's shims; the runtime and the kubelet themselves when the run that started them was
// killed) and every process left in the kubepods cgroups (containers whose shim was killed
// before them).
func killOwnedProcesses(run string) error {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", entry.Name(), "cmdline"))
		if strings.Contains(string(cmdline), run) {
			pids = append(pids, pid)
			continue
		}
		cgroups, _ := os.ReadFile(filepath.Join("/proc", entry.Name(), "cgroup"))
		if strings.Contains(string(cgroups), "/kubepods") {
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// Dead processes leave their cgroups only once reaped; give the kernel a moment.
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for time.Now().Before(deadline) {
			if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// unmountUnder detaches every mount below dir, deepest first.
func unmountUnder(dir string) error {
	file, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer file.Close()
	var points []string
	scanner := bufio.NewScanner(file)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 5 {
			continue
		}
		point := unescapeMountPath(fields[4])
		if point == dir || strings.HasPrefix(point, dir+"/") {
			points = append(points, point)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var failed []string
	for _, point := range points {
		if err := syscall.Unmount(point, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			failed = append(failed, point+": "+err.Error())
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("unmounting: %s", strings.Join(failed, "; "))
	}
	return nil
}

// unescapeMountPath reads mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(path string) string {
	if !strings.Contains(path, `\`) {
		return path
	}
	var out strings.Builder
	for i := 0; i < len(path); i++ {
		if path[i] == '\\' && i+3 < len(path) {
			if value, err := strconv.ParseUint(path[i+1:i+4], 8, 8); err == nil {
				out.WriteByte(byte(value))
				i += 3
				continue
			}
		}
		out.WriteByte(path[i])
	}
	return out.String()
}

// removeChains deletes, in every table, the rules that jump to a chain with one of prefixes and
// then those chains themselves, leaving every other rule of the host as it was.
func removeChains(tool string, prefixes []string) error {
	saved, err := exec.Command(tool + "-save").Output()
	if err != nil {
		if _, lookErr := exec.LookPath(tool + "-save"); lookErr != nil {
			return nil
		}
		return fmt.Errorf("%s-save: %w", tool, err)
	}
	owned := func(chain string) bool {
		for _, prefix := range prefixes {
			if strings.HasPrefix(chain, prefix) {
				return true
			}
		}
		return false
	}
	var script strings.Builder
	var table string
	var deletes, chains []string
	flushTable := func() {
		if table == "" || (len(deletes) == 0 && len(chains) == 0) {
			return
		}
		script.WriteString("*" + table + "\n")
		for _, rule := range deletes {
			script.WriteString("-D " + rule + "\n")
		}
		for _, chain := range chains {
			script.WriteString("-F " + chain + "\n")
		}
		for _, chain := range chains {
			script.WriteString("-X " + chain + "\n")
		}
		script.WriteString("COMMIT\n")
	}
	for _, line := range strings.Split(string(saved), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			flushTable()
			table, deletes, chains = strings.TrimPrefix(line, "*"), nil, nil
		case strings.HasPrefix(line, ":"):
			chain := strings.Fields(strings.TrimPrefix(line, ":"))[0]
			if owned(chain) {
				chains = append(chains, chain)
			}
		case strings.HasPrefix(line, "-A "):
			fields := strings.Fields(line)
			chain := fields[1]
			if owned(chain) {
				continue // flushed with its chain
			}
			for i, field := range fields {
				if (field == "-j" || field == "-g") && i+1 < len(fields) && owned(fields[i+1]) {
					deletes = append(deletes, strings.TrimPrefix(line, "-A "))
					break
				}
			}
		}
	}
	flushTable()
	if script.Len() == 0 {
		return nil
	}
	if err := runInput(tool+"-restore", script.String(), "--noflush"); err != nil {
		return fmt.Errorf("removing the %s chains: %w", tool, err)
	}
	return nil
}

// removeCgroups removes the named cgroup tree in every v1 hierarchy (or the v2 one), deepest
// first; the processes in it must have gone.
func removeCgroups(name string) error {
	var dirs []string
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + name)
	if unified := "/sys/fs/cgroup/" + name; fileExists(unified) {
		roots = append(roots, unified)
	}
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(path string, entry os.DirEntry, err error) error {
			if err == nil && entry.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var failed []string
	for _, dir := range dirs {
		if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
			failed = append(failed, dir+": "+err.Error())
		}
	}
	if len(failed) > 0 {
		if len(failed) > 3 {
			failed = append(failed[:3], fmt.Sprintf("and %d more", len(failed)-3))
		}
		return fmt.Errorf("removing cgroups: %s", strings.Join(failed, "; "))
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// runInput runs program with args, text on its standard input.
func runInput(program, text string, args ...string) error {
	cmd := exec.Command(program, args...)
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", program, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitSocket waits until a unix socket accepts connections.
func waitSocket(ctx context.Context, proc *process, socket string, timeout time.Duration) error {
	return waitUntil(ctx, timeout, socket, func() (bool, error) {
		if proc.exited() {
			return false, fmt.Errorf("%s exited (%v); its log ends:\n%s", proc.name, proc.err, proc.tail(20))
		}
		conn, err := net.Dial("unix", socket)
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	})
}
