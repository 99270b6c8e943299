package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"

	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/testenv"
)

// The image's promises (deploy/image/Containerfile, docs/deploy.md).
const (
	maxImageBytes = 80 * 1000 * 1000 // at most 80 MB, uncompressed
	serviceUID    = 65532
	wantListen    = "0.0.0.0:8080"
	wantDatabase  = "sqlite:/data/quarantine.db"
	testVersion   = "v0.0.0-imagetest"
)

// envReuse names an image the tests use instead of building one (for
// example the quarantine:latest that `make image` just built).
const envReuse = "QUARANTINE_TEST_IMAGE"

// built is the image under test, built (or named by envReuse) once per
// test run and unpacked into a folder; TestMain removes what it built.
type built struct {
	name    string
	ours    bool          // built by this run: removed at the end
	config  ocispec.Image // the image's configuration
	layers  []ocispec.Descriptor
	size    int64  // the layers' uncompressed bytes
	rootDir string // the unpacked root filesystem
	err     error
}

var (
	imageOnce sync.Once
	img       built
	workDir   string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if img.ours {
		if out, err := exec.Command(testenv.Lookup(testenv.Podman), "rmi", "--force", img.name).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "podman rmi %s: %v\n%s", img.name, err, out)
		}
	}
	if workDir != "" {
		os.RemoveAll(workDir)
	}
	os.Exit(code)
}

// setup returns the image, building and unpacking it on first use. It
// needs podman and root (chroot, setns, the image's file owners); without
// them the test skips, or fails under CI=true.
func setup(t *testing.T) *built {
	t.Helper()
	podman := testenv.Require(t, testenv.Podman, "podman")
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, testenv.Podman, "the image tests need root (chroot as the image's user, network namespaces)")
	}
	imageOnce.Do(func() { img.err = prepare(podman) })
	if img.err != nil {
		t.Fatal(img.err)
	}
	return &img
}

func prepare(podman string) error {
	dir, err := os.MkdirTemp("", "quarantine-image-test-")
	if err != nil {
		return err
	}
	workDir = dir
	img.name = os.Getenv(envReuse)
	if img.name == "" {
		img.name = fmt.Sprintf("localhost/quarantine-imagetest:%d", time.Now().UnixNano())
		cmd := exec.Command("../../scripts/image.sh")
		cmd.Env = append(os.Environ(), "TAGS="+img.name, "VERSION="+testVersion)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		img.ours = true
		if _, err := cmd.Output(); err != nil {
			return fmt.Errorf("scripts/image.sh: %v\n%s", err, stderr.Bytes())
		}
	}
	layout := filepath.Join(dir, "oci")
	if out, err := exec.Command(podman, "save", "--format", "oci-dir", "-o", layout, img.name).CombinedOutput(); err != nil {
		return fmt.Errorf("podman save %s: %v\n%s", img.name, err, out)
	}
	var index ocispec.Index
	if err := readJSON(filepath.Join(layout, "index.json"), &index); err != nil {
		return err
	}
	if len(index.Manifests) != 1 {
		return fmt.Errorf("index.json lists %d manifests, want 1", len(index.Manifests))
	}
	var manifest ocispec.Manifest
	if err := readJSON(blob(layout, index.Manifests[0]), &manifest); err != nil {
		return err
	}
	if err := readJSON(blob(layout, manifest.Config), &img.config); err != nil {
		return err
	}
	img.layers = manifest.Layers
	img.rootDir = filepath.Join(dir, "root")
	if err := os.Mkdir(img.rootDir, 0o755); err != nil {
		return err
	}
	for _, l := range manifest.Layers {
		n, err := untar(blob(layout, l), l.MediaType, img.rootDir)
		if err != nil {
			return fmt.Errorf("layer %s: %w", l.Digest, err)
		}
		img.size += n
	}
	return nil
}

func blob(layout string, d ocispec.Descriptor) string {
	return filepath.Join(layout, "blobs", d.Digest.Algorithm().String(), d.Digest.Encoded())
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// untar applies one layer (a tar, gzip-compressed or not) to root,
// keeping modes and owners (we are root), and returns its uncompressed
// size. The image is built FROM scratch in COPY steps, so a layer never
// deletes: a whiteout is an error.
func untar(path, mediaType, root string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var r io.Reader = f
	switch mediaType {
	case ocispec.MediaTypeImageLayer:
	case ocispec.MediaTypeImageLayerGzip:
		zr, err := gzip.NewReader(f)
		if err != nil {
			return 0, err
		}
		r = zr
	default:
		return 0, fmt.Errorf("unexpected media type %s", mediaType)
	}
	cr := &countingReader{r: r}
	if err := extract(tar.NewReader(cr), root); err != nil {
		return 0, err
	}
	if _, err := io.Copy(io.Discard, cr); err != nil { // the end-of-archive padding
		return 0, err
	}
	return cr.n, nil
}

func extract(tr *tar.Reader, root string) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean("/" + h.Name)
		if strings.HasPrefix(filepath.Base(name), ".wh.") {
			return fmt.Errorf("unexpected whiteout %s", h.Name)
		}
		dst := filepath.Join(root, name)
		mode := os.FileMode(h.Mode).Perm()
		if h.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			w, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(w, tr)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, dst); err != nil {
				return err
			}
			if err := os.Lchown(dst, h.Uid, h.Gid); err != nil {
				return err
			}
			continue
		case tar.TypeLink:
			if err := os.Link(filepath.Join(root, filepath.Clean("/"+h.Linkname)), dst); err != nil {
				return err
			}
			continue
		default:
			return fmt.Errorf("%s: unexpected tar entry type %q", h.Name, h.Typeflag)
		}
		if err := os.Lchown(dst, h.Uid, h.Gid); err != nil {
			return err
		}
		if err := os.Chmod(dst, mode); err != nil {
			return err
		}
	}
}

// TestImageConfig checks what the image declares: a non-root numeric
// user (Kubernetes' runAsNonRoot needs a number), the entrypoint and
// default command, the listen address and database of the service's
// defaults in the image, /data as a volume, port 8080, and the size.
func TestImageConfig(t *testing.T) {
	b := setup(t)
	c := b.config.Config
	if c.User != fmt.Sprintf("%d:%d", serviceUID, serviceUID) {
		t.Errorf("User = %q, want %d:%d", c.User, serviceUID, serviceUID)
	}
	if !slices.Equal(c.Entrypoint, []string{"/quarantine"}) || !slices.Equal(c.Cmd, []string{"serve"}) {
		t.Errorf("Entrypoint %q Cmd %q, want [/quarantine] [serve]", c.Entrypoint, c.Cmd)
	}
	env := envMap(c.Env)
	if env["QUARANTINE_LISTEN"] != wantListen || env["QUARANTINE_DATABASE_URL"] != wantDatabase {
		t.Errorf("Env = %q, want QUARANTINE_LISTEN=%s and QUARANTINE_DATABASE_URL=%s", c.Env, wantListen, wantDatabase)
	}
	if _, ok := c.Volumes["/data"]; !ok || len(c.Volumes) != 1 {
		t.Errorf("Volumes = %v, want /data", c.Volumes)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("ExposedPorts = %v, want 8080/tcp", c.ExposedPorts)
	}
	if b.ours && b.config.Config.Labels["org.opencontainers.image.version"] != testVersion {
		t.Errorf("version label = %q, want %q", b.config.Config.Labels["org.opencontainers.image.version"], testVersion)
	}
	size := b.size
	t.Logf("image %s: %d layers, %.1f MB", b.name, len(b.layers), float64(size)/1e6)
	if size > maxImageBytes {
		t.Errorf("the image is %d bytes, more than %d", size, maxImageBytes)
	}
}

// TestImageFiles checks the root filesystem: only what the service needs
// (no shell), CA certificates Go can load, zone data, the user in
// /etc/passwd, /data owned by it, /tmp writable by all with the sticky
// bit.
func TestImageFiles(t *testing.T) {
	b := setup(t)
	entries, err := os.ReadDir(b.rootDir)
	if err != nil {
		t.Fatal(err)
	}
	var top []string
	for _, e := range entries {
		top = append(top, e.Name())
	}
	if want := []string{"data", "etc", "quarantine", "tmp", "usr"}; !slices.Equal(top, want) {
		t.Errorf("the image's root holds %q, want %q", top, want)
	}
	if _, err := os.Lstat(filepath.Join(b.rootDir, "bin", "sh")); err == nil {
		t.Error("the image has a shell")
	}

	pem, err := os.ReadFile(filepath.Join(b.rootDir, "etc", "ssl", "certs", "ca-certificates.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) || len(bytes.Split(pem, []byte("BEGIN CERTIFICATE"))) < 100 {
		t.Error("the CA bundle holds fewer than 99 certificates")
	}
	tz, err := os.ReadFile(filepath.Join(b.rootDir, "usr", "share", "zoneinfo", "Europe", "Paris"))
	if err != nil {
		t.Fatal(err)
	}
	loc, err := time.LoadLocationFromTZData("Europe/Paris", tz)
	if err != nil {
		t.Fatal(err)
	}
	if _, off := time.Date(2026, 7, 1, 12, 0, 0, 0, loc).Zone(); off != 2*3600 {
		t.Errorf("Europe/Paris in July is UTC%+d, want +2h", off/3600)
	}

	passwd, err := os.ReadFile(filepath.Join(b.rootDir, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("quarantine:x:%d:%d:", serviceUID, serviceUID); !strings.HasPrefix(string(passwd), want) {
		t.Errorf("/etc/passwd = %q, want a line starting %q", passwd, want)
	}
	checkOwner(t, filepath.Join(b.rootDir, "data"), serviceUID, os.ModeDir|0o755)
	checkOwner(t, filepath.Join(b.rootDir, "tmp"), 0, os.ModeDir|os.ModeSticky|0o777)
	checkOwner(t, filepath.Join(b.rootDir, "quarantine"), 0, 0o755)
}

func checkOwner(t *testing.T, path string, uid uint32, mode os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != uid || fi.Mode() != mode {
		t.Errorf("%s: uid %d mode %v, want uid %d mode %v", path, st.Uid, fi.Mode(), uid, mode)
	}
}

// TestImageVersion runs the entrypoint with `version` in the image's root
// as the image's user: the binary is static (the image has no loader and
// no libc) and carries the version the image was built with.
func TestImageVersion(t *testing.T) {
	b := setup(t)
	cmd := b.command(context.Background(), "version")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("version: %v", err)
	}
	want := fmt.Sprintf("quarantine %s linux/%s ", testVersion, runtime.GOARCH)
	if !b.ours {
		want = "quarantine "
	}
	if !strings.HasPrefix(string(out), want) {
		t.Fatalf("version printed %q, want it to start %q", out, want)
	}
}

// TestImageServe runs the image's default command (serve) as the image
// would: in its root, as its user, with its environment, in a network
// namespace of its own (a container's), so it listens on its default
// 0.0.0.0:8080 and keeps the embedded SQLite in /data. /healthz and
// /readyz answer 200 from inside that namespace; SIGTERM stops it
// cleanly; the database was created in /data, owned by the service's
// user.
func TestImageServe(t *testing.T) {
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cmd := b.command(ctx, b.config.Config.Cmd...)
	cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNET
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() // a failed test leaves nothing running
	exited := make(chan error, 1)
	serving := make(chan string, 1)
	var logBuf strings.Builder
	var logMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			logMu.Lock()
			logBuf.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if strings.Contains(sc.Text(), "msg=serving") {
				select {
				case serving <- sc.Text():
				default:
				}
			}
		}
		exited <- cmd.Wait()
	}()
	dump := func() string {
		logMu.Lock()
		defer logMu.Unlock()
		return logBuf.String()
	}
	select {
	case line := <-serving:
		// Go listens on 0.0.0.0 through a dual-stack socket: [::]:8080.
		if !strings.Contains(line, "addr=[::]:8080 ") && !strings.Contains(line, "addr=0.0.0.0:8080 ") {
			t.Errorf("serving on %q, want every address, port 8080", line)
		}
	case err := <-exited:
		t.Fatalf("serve exited before serving: %v\n%s", err, dump())
	case <-ctx.Done():
		t.Fatalf("serve did not start within a minute\n%s", dump())
	}

	for _, path := range []string{"/healthz", "/readyz"} {
		status, err := getInNetns(cmd.Process.Pid, "127.0.0.1:8080", path)
		if err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, dump())
		}
		if status != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", path, status)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM\n%s", err, dump())
		}
	case <-ctx.Done():
		t.Fatalf("serve did not stop after SIGTERM\n%s", dump())
	}
	fi, err := os.Stat(filepath.Join(b.rootDir, "data", "quarantine.db"))
	if err != nil {
		t.Fatalf("serve left no database in /data: %v", err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != serviceUID {
		t.Errorf("/data/quarantine.db is owned by uid %d, want %d", uid, serviceUID)
	}
}

// command runs the image's entrypoint with args as the image would: in
// its root, as its user, in its working directory, with only its
// environment.
func (b *built) command(ctx context.Context, args ...string) *exec.Cmd {
	c := b.config.Config
	cmd := exec.CommandContext(ctx, c.Entrypoint[0], append(c.Entrypoint[1:], args...)...)
	cmd.Env = c.Env
	cmd.Dir = c.WorkingDir
	// No Pdeathsig: it fires when the forking thread ends, and
	// getInNetns ends threads on purpose.
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     b.rootDir,
		Credential: &syscall.Credential{Uid: serviceUID, Gid: serviceUID, Groups: []uint32{}},
	}
	return cmd
}

// getInNetns sends GET path to addr from inside the network namespace of
// process pid, bringing its loopback up first (a new namespace starts
// with it down), and returns the status. It runs on a thread of its own
// that enters the namespace and is never returned to the scheduler.
func getInNetns(pid int, addr, path string) (int, error) {
	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		status, err := func() (int, error) {
			fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return 0, err
			}
			defer unix.Close(fd)
			if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
				return 0, fmt.Errorf("setns: %w", err)
			}
			if err := loopbackUp(); err != nil {
				return 0, err
			}
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return 0, err
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
			if err != nil {
				return 0, err
			}
			if err := req.Write(conn); err != nil {
				return 0, err
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), req)
			if err != nil {
				return 0, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		}()
		done <- result{status, err}
	}()
	r := <-done
	return r.status, r.err
}

// loopbackUp sets the flag IFF_UP on lo in the calling thread's network
// namespace.
func loopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	return nil
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// TestImageMigratesPostgres runs the image's `migrate` on PostgreSQL (a
// schema of its own), in the image's root as its user: the static binary
// reaches the database over TCP without the machine's libraries (no
// resolver or user database of the machine's: netgo, osusergo), applies
// every migration, and a second run finds nothing to do.
func TestImageMigratesPostgres(t *testing.T) {
	b := setup(t)
	url := pgtest.URL(t)
	migrate := func() string {
		t.Helper()
		cmd := b.command(context.Background(), "migrate")
		cmd.Env = append(slices.Clone(cmd.Env), "QUARANTINE_DATABASE_URL="+url)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("migrate: %v\n%s", err, stderr.Bytes())
		}
		return string(out)
	}
	re := regexp.MustCompile(`schema at version (\d+) of (\d+)\n$`)
	for i := range 2 {
		out := migrate()
		m := re.FindStringSubmatch(out)
		if m == nil || m[1] != m[2] || m[1] == "0" {
			t.Fatalf("migrate run %d printed %q, want the schema at the latest version", i+1, out)
		}
	}
}
