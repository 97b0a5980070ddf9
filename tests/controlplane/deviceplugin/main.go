// Command deviceplugin is the accelerator device plugin of the test node
// (tests/controlplane/node.py): it advertises chips that do not exist here over the kubelet's
// device-plugin API, so that the real kubelet and kube-scheduler account for google.com/tpu
// and nvidia.com/gpu as they do on a GKE node: capacity and allocatable on the Node,
// scheduling by count, one pod per chip, and the environment a container of an accelerator
// pod is given at Allocate.
//
// The gRPC server is the kubelet's own device-plugin stub from the pinned k8s.io/kubernetes
// module (pkg/kubelet/cm/devicemanager/plugin/v1beta1: NewDevicePluginStub, the one the
// kubelet's device-manager tests register), one stub per resource; this file gives it the
// devices, what Allocate answers (SetAllocFunc), and when to serve and register again.
//
// There is no TPU or GPU on the test machine: each chip's device node in the container
// (/dev/accelN, /dev/nvidiaN) is the host's /dev/null, so a pod sees the names and the
// environment and nothing more. A GPU container gets NVIDIA_VISIBLE_DEVICES; a TPU container
// gets TPU_VISIBLE_CHIPS and the slice's shape as GKE gives it to the containers of a TPU
// node (tpuSlice below): one host of a single-host slice by default, or one host of a
// multi-host slice with --tpu-topology.
//
// Usage: deviceplugin --kubelet-socket PATH --resource google.com/tpu=4 --resource nvidia.com/gpu=2
//
//	[--tpu-accelerator tpu-v5-lite-podslice] [--tpu-topology 2x4]
//
// The kubelet (1.34) listens for registrations on pluginapi.KubeletSocket
// (/var/lib/kubelet/device-plugins/kubelet.sock) whatever its --root-dir, and removes every
// other socket in that folder when it starts. The plugin therefore watches its own socket
// and the kubelet's: when either is replaced (a kubelet restart) it serves again and
// registers again, as real device plugins do. The stub has a watch of its own (Stub.Watch),
// not used here: it restarts only on the kubelet socket's creation, first after a 10 s poll
// interval, and panics when a registration fails; this loop polls both sockets every 0.5 s
// and retries.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	stubapi "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
)

// kind is what one resource's chips look like inside a container.
type kind struct {
	prefix string // device IDs and device nodes: prefix + index
	envVar string // the variable that lists the allocated chips
}

const tpuResource = "google.com/tpu"

var kinds = map[string]kind{
	tpuResource:      {prefix: "accel", envVar: "TPU_VISIBLE_CHIPS"},
	"nvidia.com/gpu": {prefix: "nvidia", envVar: "NVIDIA_VISIBLE_DEVICES"},
}

// tpuSlice is the TPU slice this node is one host of, and the environment its containers
// get for it. What a GKE TPU container finds in its environment, on a 4-host v6e-16 (4x4)
// slice: TPU_ACCELERATOR_TYPE=v6e-16, TPU_TOPOLOGY=4x4, TPU_HOST_BOUNDS=2,2,1,
// TPU_CHIPS_PER_HOST_BOUNDS=2,2,1, TPU_SKIP_MDS_QUERY=true, beside TPU_WORKER_ID and
// TPU_WORKER_HOSTNAMES (the pod environment logged in AI-Hypercomputer/torchprime,
// docs/troubleshoot-distributed.md); a single-host one has TPU_HOST_BOUNDS=1,1,1. Of these,
// TPU_WORKER_ID and TPU_WORKER_HOSTNAMES are not the node's: GKE's mutating webhook sets
// them on the pods of an Indexed Job asking for google.com/tpu (GKE's TPU documentation, as
// quoted in abatilo/gke-tpu-env-injector's README), and the operator renders them itself
// (xla_sentinel_operator/desired.py _slice_env), so the plugin leaves them out.
// TPU_SKIP_MDS_QUERY says to read the slice from these variables instead of the GCE metadata
// server, which a GKE container does not reach (pytorch/xla#4499, "Try bootstrapping tpu env
// from env vars", for GKE; JAX's clusters/cloud_tpu_cluster.py does not take a container
// with it set for a GCE TPU VM).
// The topology's wraparound and the runtime's metrics ports, also in that environment, are
// not set: nothing here reads them.
type tpuSlice struct {
	acceleratorType string // TPU_ACCELERATOR_TYPE: e.g. v5litepod-8 for 8 v5e chips
	topology        string // TPU_TOPOLOGY: the slice's chips, e.g. 2x4
	hostBounds      string // TPU_HOST_BOUNDS: the slice's hosts along each axis
	chipsPerHost    string // TPU_CHIPS_PER_HOST_BOUNDS: one host's chips along each axis
}

// tpuGenerations: GKE's node label cloud.google.com/gke-tpu-accelerator to the name of
// TPU_ACCELERATOR_TYPE, whose number counts TensorCores (two a chip on v4 and v5p, one on
// v5e and v6e: v4-16 is 8 chips, v5litepod-16 is 16).
var tpuGenerations = map[string]struct {
	name         string
	coresPerChip int
}{
	"tpu-v4-podslice":      {"v4", 2},
	"tpu-v5p-slice":        {"v5p", 2},
	"tpu-v5-lite-podslice": {"v5litepod", 1},
	"tpu-v6e-slice":        {"v6e", 1},
}

// hostShapes: one TPU VM's chips as an x,y,z block, by their number (GKE's TPU machine
// types: 1, 4 or 8 chips a VM; 4 chips are 2x2, as CHIPS_PER_HOST_BOUNDS 2,2,1 above).
var hostShapes = map[int][3]int{1: {1, 1, 1}, 4: {2, 2, 1}, 8: {2, 4, 1}}

// newTPUSlice is the slice of topology ("2x2", "2x4", "2x2x4") whose hosts have chips chips
// each, of the given GKE accelerator; an error when the hosts do not tile the topology.
func newTPUSlice(accelerator, topology string, chips int) (*tpuSlice, error) {
	gen, ok := tpuGenerations[accelerator]
	if !ok {
		return nil, fmt.Errorf("unknown TPU accelerator %q", accelerator)
	}
	host, ok := hostShapes[chips]
	if !ok {
		return nil, fmt.Errorf("no TPU VM has %d chips (1, 4 or 8)", chips)
	}
	parts := strings.Split(topology, "x")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("topology %q: want AxB or AxBxC", topology)
	}
	dims := [3]int{1, 1, 1}
	total := 1
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("topology %q: want AxB or AxBxC", topology)
		}
		dims[i] = n
		total *= n
	}
	var hosts [3]string
	for i := range dims {
		if dims[i]%host[i] != 0 {
			return nil, fmt.Errorf("topology %s is not tiled by hosts of %d chips (%d,%d,%d)",
				topology, chips, host[0], host[1], host[2])
		}
		hosts[i] = strconv.Itoa(dims[i] / host[i])
	}
	return &tpuSlice{
		acceleratorType: fmt.Sprintf("%s-%d", gen.name, total*gen.coresPerChip),
		topology:        topology,
		hostBounds:      strings.Join(hosts[:], ","),
		chipsPerHost:    fmt.Sprintf("%d,%d,%d", host[0], host[1], host[2]),
	}, nil
}

func (s *tpuSlice) env() map[string]string {
	return map[string]string{
		"TPU_ACCELERATOR_TYPE":      s.acceleratorType,
		"TPU_TOPOLOGY":              s.topology,
		"TPU_HOST_BOUNDS":           s.hostBounds,
		"TPU_CHIPS_PER_HOST_BOUNDS": s.chipsPerHost,
		"TPU_SKIP_MDS_QUERY":        "true",
	}
}

type plugin struct {
	resource string
	kind     kind
	count    int
	slice    *tpuSlice // google.com/tpu only
	socket   string
	stub     *stubapi.Stub
	started  bool // Start succeeded once: later (re)serving is the stub's Restart
}

func (p *plugin) devices() []*pluginapi.Device {
	out := make([]*pluginapi.Device, p.count)
	for i := range out {
		out[i] = &pluginapi.Device{ID: fmt.Sprintf("%s%d", p.kind.prefix, i), Health: pluginapi.Healthy}
	}
	return out
}

// allocate gives each container its chips: the variable naming them (chip indices, in
// order), a device node per chip, and for TPU chips the slice's environment. The chips the
// kubelet asks for are the stub's (devs); any other ID is an error the kubelet reports on
// the pod.
func (p *plugin) allocate(req *pluginapi.AllocateRequest, devs map[string]*pluginapi.Device) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		var chips []int
		for _, id := range c.DevicesIds {
			n, err := strconv.Atoi(strings.TrimPrefix(id, p.kind.prefix))
			if _, known := devs[id]; !known || err != nil {
				return nil, fmt.Errorf("%s: unknown device %q", p.resource, id)
			}
			chips = append(chips, n)
		}
		sort.Ints(chips)
		names := make([]string, len(chips))
		specs := make([]*pluginapi.DeviceSpec, len(chips))
		for i, n := range chips {
			names[i] = strconv.Itoa(n)
			specs[i] = &pluginapi.DeviceSpec{ContainerPath: fmt.Sprintf("/dev/%s%d", p.kind.prefix, n),
				HostPath: "/dev/null", Permissions: "rw"}
		}
		envs := map[string]string{p.kind.envVar: strings.Join(names, ",")}
		if p.slice != nil {
			for k, v := range p.slice.env() {
				envs[k] = v
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses,
			&pluginapi.ContainerAllocateResponse{Envs: envs, Devices: specs})
		log.Printf("%s: allocated %s", p.resource, strings.Join(c.DevicesIds, ","))
	}
	return resp, nil
}

// serve starts the stub's server on its socket (Start removes a stale socket first), or,
// after the first time, restarts it (Restart stops the old server, then starts again).
// After a failure the next try is a Start: a Restart whose Start failed leaves the stub
// with no server, and Restart of such a stub does nothing and says nil.
func (p *plugin) serve() error {
	var err error
	if p.started {
		err = p.stub.Restart()
	} else {
		err = p.stub.Start()
	}
	p.started = err == nil
	return err
}

type resources []string

func (r *resources) String() string     { return strings.Join(*r, ",") }
func (r *resources) Set(v string) error { *r = append(*r, v); return nil }

// inode of path, or 0 when it is missing: a new file at the same path is a new inode.
func inode(path string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	return st.Ino
}

func main() {
	kubeletSocket := flag.String("kubelet-socket", pluginapi.KubeletSocket, "the kubelet's registration socket")
	var wanted resources
	flag.Var(&wanted, "resource", "NAME=COUNT, e.g. google.com/tpu=4 (repeatable): COUNT chips on this node")
	accelerator := flag.String("tpu-accelerator", "tpu-v5-lite-podslice",
		"the node's TPU, as GKE's cloud.google.com/gke-tpu-accelerator label names it")
	topology := flag.String("tpu-topology", "",
		"the TPU slice's topology (cloud.google.com/gke-tpu-topology), e.g. 2x4: this node is one "+
			"of its hosts (default: a single-host slice of this node's chips)")
	flag.Parse()
	*kubeletSocket = filepath.Clean(*kubeletSocket)
	dir := filepath.Dir(*kubeletSocket)
	var plugins []*plugin
	for _, r := range wanted {
		name, count, ok := strings.Cut(r, "=")
		n, err := strconv.Atoi(count)
		k, known := kinds[name]
		if !ok || err != nil || n < 1 || !known {
			log.Fatalf("--resource %q: want NAME=COUNT with NAME one of google.com/tpu, nvidia.com/gpu", r)
		}
		p := &plugin{resource: name, kind: k, count: n,
			socket: filepath.Join(dir, "xs-"+strings.NewReplacer("/", "-", ".", "-").Replace(name)+".sock")}
		if name == tpuResource {
			shape := *topology
			if shape == "" { // one host: the host's own block of chips
				h, known := hostShapes[n]
				if !known {
					log.Fatalf("--resource %q: no TPU VM has %d chips (1, 4 or 8)", r, n)
				}
				shape = fmt.Sprintf("%dx%d", h[0], h[1])
			}
			if p.slice, err = newTPUSlice(*accelerator, shape, n); err != nil {
				log.Fatalf("--tpu-topology %q: %v", shape, err)
			}
			log.Printf("%s: %d chips, one host of a %s slice %s (host bounds %s)", name, n,
				p.slice.acceleratorType, p.slice.topology, p.slice.hostBounds)
		}
		p.stub = stubapi.NewDevicePluginStub(p.devices(), p.socket, name, false, false)
		p.stub.SetAllocFunc(p.allocate)
		plugins = append(plugins, p)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	// One pass: (re)serve and (re)register every plugin whose socket or kubelet changed.
	registered := map[*plugin][2]uint64{} // plugin -> (its socket's inode, the kubelet's)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		kubelet := inode(*kubeletSocket)
		for _, p := range plugins {
			if kubelet == 0 {
				break // no kubelet yet (or restarting): wait for its socket
			}
			if seen, ok := registered[p]; ok && seen == [2]uint64{inode(p.socket), kubelet} {
				continue
			}
			if err := p.serve(); err != nil {
				log.Printf("%s: serve %s: %v", p.resource, p.socket, err)
				continue
			}
			// The stub stops its server itself when the kubelet refuses it.
			if err := p.stub.Register(*kubeletSocket, p.resource, ""); err != nil {
				log.Printf("%s: register with %s: %v", p.resource, *kubeletSocket, err)
				continue
			}
			registered[p] = [2]uint64{inode(p.socket), kubelet}
			// node.py counts these lines (RealNode._plugin_registrations).
			log.Printf("%s: %d devices registered with the kubelet (endpoint %s)", p.resource, p.count, p.socket)
		}
		select {
		case <-stop:
			for _, p := range plugins {
				if err := p.stub.Stop(); err != nil {
					log.Printf("%s: stop: %v", p.resource, err)
				}
			}
			return
		case <-tick.C:
		}
	}
}
