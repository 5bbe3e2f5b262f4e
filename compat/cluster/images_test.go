package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// readImageArchive reads a `docker save` archive back: its manifest, its config and its
// layer's entries (contents of regular files included).
type readImage struct {
	manifest []dockerManifest
	config   struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
		Config       struct {
			Entrypoint []string
			Cmd        []string
			Env        []string
			WorkingDir string
			User       string
		} `json:"config"`
		RootFS struct {
			Type    string   `json:"type"`
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	layerDigest string
	entries     []*tar.Header
	contents    map[string][]byte
}

func readImageArchive(t *testing.T, archive string) *readImage {
	t.Helper()
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = body
	}
	img := &readImage{contents: map[string][]byte{}}
	if err := json.Unmarshal(files["manifest.json"], &img.manifest); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(img.manifest) != 1 || len(img.manifest[0].Layers) != 1 {
		t.Fatalf("manifest.json: want one image of one layer, got %+v", img.manifest)
	}
	configData, ok := files[img.manifest[0].Config]
	if !ok {
		t.Fatalf("config %s missing from the archive", img.manifest[0].Config)
	}
	configSum := sha256.Sum256(configData)
	if want := hex.EncodeToString(configSum[:]) + ".json"; img.manifest[0].Config != want {
		t.Errorf("config named %s, its digest gives %s", img.manifest[0].Config, want)
	}
	if err := json.Unmarshal(configData, &img.config); err != nil {
		t.Fatalf("config: %v", err)
	}
	layer, ok := files[img.manifest[0].Layers[0]]
	if !ok {
		t.Fatalf("layer %s missing from the archive", img.manifest[0].Layers[0])
	}
	layerSum := sha256.Sum256(layer)
	img.layerDigest = "sha256:" + hex.EncodeToString(layerSum[:])
	lr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		img.entries = append(img.entries, h)
		if h.Typeflag == tar.TypeReg {
			body, err := io.ReadAll(lr)
			if err != nil {
				t.Fatal(err)
			}
			img.contents[h.Name] = body
		}
	}
	return img
}

func (img *readImage) entry(name string) *tar.Header {
	for _, h := range img.entries {
		if strings.TrimSuffix(h.Name, "/") == name {
			return h
		}
	}
	return nil
}

func TestWriteImageArchive(t *testing.T) {
	dir := t.TempDir()
	source := filepath.Join(dir, "tool")
	if err := os.WriteFile(source, []byte("#!/bin/sh\necho tool\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	files := []imageFile{
		{Path: "/usr/local/bin/tool", Source: source},
		{Path: "/usr/local/bin/tool-setuid", Source: source, Mode: 0o755 | os.ModeSetuid},
		{Path: "/etc/message", Data: []byte("hello\n")},
		{Path: "/etc/empty", Data: []byte{}},
		{Path: "/usr/sbin/alias", Link: "../local/bin/tool"},
		{Path: "/lib", Link: "usr/lib"},
		{Path: "/tmp", Dir: true, Mode: 0o777 | os.ModeSticky},
		{Path: "/var/lib/app", Dir: true, Mode: 0o777},
		{Path: "/etc/message", Data: []byte("hello\n")}, // the same entry twice is one entry
	}
	config := imageConfig{Entrypoint: []string{"/usr/local/bin/tool"}, Cmd: []string{"run"},
		Env: []string{"PATH=/usr/bin", "A=b"}, WorkingDir: "/var/lib/app", User: "1337"}
	archive := filepath.Join(dir, "out", "image.tar")
	ref := "meshlife.local/workload:dev"
	if err := writeImageArchiveWith(archive, ref, config, files); err != nil {
		t.Fatal(err)
	}
	img := readImageArchive(t, archive)
	if got := img.manifest[0].RepoTags; len(got) != 1 || got[0] != ref {
		t.Errorf("RepoTags %v, want [%s]", got, ref)
	}
	if !strings.HasSuffix(img.manifest[0].Layers[0], "/layer.tar") {
		t.Errorf("layer path %s", img.manifest[0].Layers[0])
	}
	c := img.config
	if c.Architecture != "amd64" || c.OS != "linux" {
		t.Errorf("platform %s/%s, want linux/amd64", c.OS, c.Architecture)
	}
	if c.RootFS.Type != "layers" || len(c.RootFS.DiffIDs) != 1 || c.RootFS.DiffIDs[0] != img.layerDigest {
		t.Errorf("rootfs %+v, the layer's digest is %s", c.RootFS, img.layerDigest)
	}
	if strings.Join(c.Config.Entrypoint, " ") != "/usr/local/bin/tool" || strings.Join(c.Config.Cmd, " ") != "run" ||
		strings.Join(c.Config.Env, " ") != "PATH=/usr/bin A=b" || c.Config.WorkingDir != "/var/lib/app" || c.Config.User != "1337" {
		t.Errorf("config %+v", c.Config)
	}

	type want struct {
		typeflag byte
		mode     int64
		link     string
		content  string
	}
	wants := map[string]want{
		"etc":                       {tar.TypeDir, 0o755, "", ""},
		"etc/empty":                 {tar.TypeReg, 0o644, "", ""},
		"etc/message":               {tar.TypeReg, 0o644, "", "hello\n"},
		"lib":                       {tar.TypeSymlink, 0o777, "usr/lib", ""},
		"tmp":                       {tar.TypeDir, 0o1777, "", ""},
		"usr":                       {tar.TypeDir, 0o755, "", ""},
		"usr/local":                 {tar.TypeDir, 0o755, "", ""},
		"usr/local/bin":             {tar.TypeDir, 0o755, "", ""},
		"usr/local/bin/tool":        {tar.TypeReg, 0o750, "", "#!/bin/sh\necho tool\n"},
		"usr/local/bin/tool-setuid": {tar.TypeReg, 0o4755, "", "#!/bin/sh\necho tool\n"},
		"usr/sbin":                  {tar.TypeDir, 0o755, "", ""},
		"usr/sbin/alias":            {tar.TypeSymlink, 0o777, "../local/bin/tool", ""},
		"var":                       {tar.TypeDir, 0o755, "", ""},
		"var/lib":                   {tar.TypeDir, 0o755, "", ""},
		"var/lib/app":               {tar.TypeDir, 0o777, "", ""},
	}
	if len(img.entries) != len(wants) {
		var names []string
		for _, h := range img.entries {
			names = append(names, h.Name)
		}
		t.Errorf("layer has %d entries, want %d: %v", len(img.entries), len(wants), names)
	}
	seen := map[string]bool{}
	for _, h := range img.entries {
		name := strings.TrimSuffix(h.Name, "/")
		w, ok := wants[name]
		if !ok {
			t.Errorf("unexpected layer entry %s", h.Name)
			continue
		}
		if parent := path.Dir(name); parent != "." && !seen[parent] {
			t.Errorf("%s comes before its folder %s", name, parent)
		}
		seen[name] = true
		if h.Typeflag != w.typeflag || h.Mode != w.mode || h.Linkname != w.link {
			t.Errorf("%s: type %c mode %o link %q, want type %c mode %o link %q", name, h.Typeflag, h.Mode, h.Linkname, w.typeflag, w.mode, w.link)
		}
		if h.Typeflag == tar.TypeDir && !strings.HasSuffix(h.Name, "/") {
			t.Errorf("folder %s has no trailing slash", h.Name)
		}
		if strings.HasPrefix(h.Name, "/") || strings.HasPrefix(h.Name, "./") {
			t.Errorf("entry %s is not relative to the root", h.Name)
		}
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(imageEpoch) {
			t.Errorf("%s: owner %d:%d, time %v", name, h.Uid, h.Gid, h.ModTime)
		}
		if h.Typeflag == tar.TypeReg && string(img.contents[h.Name]) != w.content {
			t.Errorf("%s: content %q, want %q", name, img.contents[h.Name], w.content)
		}
	}

	// The same input, the same bytes.
	again := filepath.Join(dir, "again.tar")
	if err := writeImageArchiveWith(again, ref, config, files); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(archive)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("two archives of the same files differ")
	}
	// No scratch files left beside the archive.
	left, _ := filepath.Glob(filepath.Join(dir, "out", ".*"))
	if len(left) != 0 {
		t.Errorf("scratch files left: %v", left)
	}
}

func TestWriteImageArchiveRefuses(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		ref   string
		files []imageFile
	}{
		"short ref":          {"pause:3.10", []imageFile{{Path: "/a", Data: []byte("a")}}},
		"no tag":             {"registry.k8s.io/pause", []imageFile{{Path: "/a", Data: []byte("a")}}},
		"no registry":        {"library/pause:3.10", []imageFile{{Path: "/a", Data: []byte("a")}}},
		"relative path":      {"meshlife.local/x:dev", []imageFile{{Path: "a", Data: []byte("a")}}},
		"unclean path":       {"meshlife.local/x:dev", []imageFile{{Path: "/a/../b", Data: []byte("a")}}},
		"root":               {"meshlife.local/x:dev", []imageFile{{Path: "/", Dir: true}}},
		"two kinds":          {"meshlife.local/x:dev", []imageFile{{Path: "/a", Dir: true, Link: "b"}}},
		"twice, differently": {"meshlife.local/x:dev", []imageFile{{Path: "/a", Data: []byte("a")}, {Path: "/a", Data: []byte("b")}}},
		"under a link":       {"meshlife.local/x:dev", []imageFile{{Path: "/lib", Link: "usr/lib"}, {Path: "/lib/x.so", Data: []byte("a")}}},
		"under a file":       {"meshlife.local/x:dev", []imageFile{{Path: "/a", Data: []byte("a")}, {Path: "/a/b", Data: []byte("b")}}},
		"missing source":     {"meshlife.local/x:dev", []imageFile{{Path: "/a", Source: filepath.Join(dir, "none")}}},
	}
	for name, c := range cases {
		archive := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".tar")
		if err := writeImageArchive(archive, c.ref, c.files); err == nil {
			t.Errorf("%s: no error", name)
		}
		if _, err := os.Stat(archive); err == nil {
			t.Errorf("%s: archive written", name)
		}
	}
}

func TestSmallImages(t *testing.T) {
	dir := t.TempDir()
	binary := filepath.Join(dir, "bin")
	if err := os.WriteFile(binary, []byte("\x7fELF fake"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ref        string
		files      []imageFile
		config     imageConfig
		entrypoint string
	}{
		{pauseImageRef, pauseImageFiles(binary), pauseImageConfig(), "/pause"},
		{"meshlife.local/workload:dev", workloadImageFiles(binary), workloadImageConfig(), "/workload"},
	} {
		archive := filepath.Join(dir, "image.tar")
		if err := writeImageArchiveWith(archive, c.ref, c.config, c.files); err != nil {
			t.Fatal(err)
		}
		img := readImageArchive(t, archive)
		if got := strings.Join(img.config.Config.Entrypoint, " "); got != c.entrypoint {
			t.Errorf("%s: entrypoint %q, want %s", c.ref, got, c.entrypoint)
		}
		regular := 0
		for _, entry := range img.entries {
			if entry.Typeflag == tar.TypeReg {
				regular++
			}
		}
		if regular != len(c.files) {
			t.Errorf("%s: layer %+v, want %d files", c.ref, img.entries, len(c.files))
		}
		for _, file := range c.files {
			h := img.entry(strings.TrimPrefix(file.Path, "/"))
			if h == nil || h.Mode != 0o755 || h.Typeflag != tar.TypeReg {
				t.Errorf("%s: layer %+v, want an executable file at %s", c.ref, img.entries, file.Path)
			}
		}
		if img.entry(strings.TrimPrefix(c.entrypoint, "/")) == nil {
			t.Errorf("%s: no entrypoint %s in the layer", c.ref, c.entrypoint)
		}
	}
}

// TestProxyImageFiles builds the proxy layer from this machine's iptables and libraries,
// with this test binary standing in for pilot-agent and Envoy, and checks that every path
// the image needs resolves inside the image.
func TestProxyImageFiles(t *testing.T) {
	for _, host := range []string{"/usr/sbin/xtables-nft-multi", "/usr/sbin/xtables-legacy-multi", proxyXtables} {
		if _, err := os.Stat(host); err != nil {
			t.Skipf("no Debian iptables here: %v", err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	module := t.TempDir()
	bootstrapDir := filepath.Join(module, "tools", "packaging", "common")
	if err := os.MkdirAll(bootstrapDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bootstrapDir, "envoy_bootstrap.json"), []byte(`{"node":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := proxyImageFiles(self, self, module)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "proxy.tar")
	if err := writeImageArchiveWith(archive, "meshlife.local/proxyv2:dev", proxyImageConfig(), files); err != nil {
		t.Fatal(err)
	}
	img := readImageArchive(t, archive)
	if got := strings.Join(img.config.Config.Entrypoint, " "); got != "/usr/local/bin/pilot-agent" {
		t.Errorf("entrypoint %q", got)
	}
	if img.config.Config.WorkingDir != "/" || !strings.Contains(strings.Join(img.config.Config.Env, " "), "/usr/sbin") {
		t.Errorf("config %+v", img.config.Config)
	}
	// resolve follows the image's own symbolic links to a regular file or folder.
	resolve := func(name string) *tar.Header {
		name = strings.TrimPrefix(path.Clean(name), "/")
		for range 40 {
			parts := strings.Split(name, "/")
			moved := false
			for i := range parts {
				prefix := strings.Join(parts[:i+1], "/")
				h := img.entry(prefix)
				if h == nil {
					return nil
				}
				if h.Typeflag == tar.TypeSymlink {
					target := h.Linkname
					if !path.IsAbs(target) {
						target = path.Join(path.Dir("/"+prefix), target)
					}
					name = strings.TrimPrefix(path.Join(append([]string{target}, parts[i+1:]...)...), "/")
					moved = true
					break
				}
			}
			if !moved {
				return img.entry(name)
			}
		}
		return nil
	}
	for _, name := range []string{
		"/usr/local/bin/pilot-agent", "/usr/local/bin/envoy", "/var/lib/istio/envoy/envoy_bootstrap_tmpl.json",
		"/lib64/ld-linux-x86-64.so.2", "/usr/lib/x86_64-linux-gnu/xtables/libxt_owner.so",
		"/usr/lib/x86_64-linux-gnu/xtables/libxt_REDIRECT.so", "/etc/passwd", "/etc/group",
	} {
		if h := resolve(name); h == nil || h.Typeflag != tar.TypeReg {
			t.Errorf("%s does not resolve to a file in the image", name)
		}
	}
	for name, multi := range proxyIptablesNames {
		h := img.entry("usr/sbin/" + name)
		if h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != multi {
			t.Errorf("/usr/sbin/%s: %+v, want a link to %s", name, h, multi)
		}
		if r := resolve("/usr/sbin/" + name); r == nil || r.Typeflag != tar.TypeReg || r.Mode&0o111 == 0 {
			t.Errorf("/usr/sbin/%s does not resolve to an executable", name)
		}
	}
	for _, binary := range []string{"/usr/sbin/xtables-nft-multi", "/usr/sbin/xtables-legacy-multi", self} {
		libs, err := sharedLibraries(binary)
		if err != nil {
			t.Fatal(err)
		}
		for _, lib := range libs {
			if h := resolve(lib); h == nil || h.Typeflag != tar.TypeReg {
				t.Errorf("%s's library %s does not resolve in the image", binary, lib)
			}
		}
	}
	for name, mode := range map[string]int64{"etc/istio/proxy": 0o777, "var/lib/istio/data": 0o777,
		"var/run/secrets/workload-spiffe-uds": 0o777, "tmp": 0o1777, "run": 0o755} {
		if h := img.entry(name); h == nil || h.Typeflag != tar.TypeDir || h.Mode != mode {
			t.Errorf("/%s: %+v, want a folder of mode %o", name, h, mode)
		}
	}
	if !strings.Contains(string(img.contents["etc/passwd"]), "istio-proxy:x:1337:1337:") {
		t.Errorf("/etc/passwd has no istio-proxy 1337: %q", img.contents["etc/passwd"])
	}

	if _, err := proxyImageFiles(self, self, t.TempDir()); err == nil {
		t.Error("no error for a module without the bootstrap template")
	}
}

func TestSharedLibrariesStatic(t *testing.T) {
	text := filepath.Join(t.TempDir(), "text")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if libs, err := sharedLibraries(text); err != nil || libs != nil {
		t.Errorf("a script: %v, %v", libs, err)
	}
}

func TestImportImageReportsCtr(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "ctr")
	argsFile := filepath.Join(dir, "args")
	script := "#!/bin/sh\nprintf '%s ' \"$@\" > " + argsFile + "\necho 'ctr: image might be filtered out' >&2\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	err := importImage(context.Background(), fake, "/run/x/containerd.sock", "/tmp/image.tar")
	if err == nil || !strings.Contains(err.Error(), "image might be filtered out") {
		t.Errorf("error %v does not carry ctr's output", err)
	}
	args, _ := os.ReadFile(argsFile)
	if got := strings.TrimSpace(string(args)); got != "-n k8s.io --address /run/x/containerd.sock images import --all-platforms /tmp/image.tar" {
		t.Errorf("ctr ran with %q", got)
	}
}
