// Command deviceplugin is the accelerator device plugin of the test node
// (tests/controlplane/node.py): it speaks the kubelet's device-plugin API (v1beta1 gRPC) and
// advertises chips that do not exist here, so that the real kubelet and kube-scheduler
// account for google.com/tpu and nvidia.com/gpu as they do on a GKE node: capacity and
// allocatable on the Node, scheduling by count, one pod per chip, and the environment a
// container of an accelerator pod is given at Allocate.
//
// There is no TPU or GPU on the test machine: each chip's device node in the container
// (/dev/accelN, /dev/nvidiaN) is the host's /dev/null, so a pod sees the names and the
// environment (TPU_VISIBLE_CHIPS, NVIDIA_VISIBLE_DEVICES) and nothing more.
//
// Usage: deviceplugin --kubelet-socket PATH --resource google.com/tpu=4 --resource nvidia.com/gpu=2
//
// The kubelet (1.34) listens for registrations on pluginapi.KubeletSocket
// (/var/lib/kubelet/device-plugins/kubelet.sock) whatever its --root-dir, and removes every
// other socket in that folder when it starts. The plugin therefore watches its own socket
// and the kubelet's: when either is replaced (a kubelet restart) it serves again and
// registers again, as real device plugins do.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// kind is what one resource's chips look like inside a container.
type kind struct {
	prefix string // device IDs and device nodes: prefix + index
	envVar string // the variable that lists the allocated chips
}

var kinds = map[string]kind{
	"google.com/tpu": {prefix: "accel", envVar: "TPU_VISIBLE_CHIPS"},
	"nvidia.com/gpu": {prefix: "nvidia", envVar: "NVIDIA_VISIBLE_DEVICES"},
}

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	resource string
	kind     kind
	count    int
	socket   string
	server   *grpc.Server
}

func (p *plugin) devices() []*pluginapi.Device {
	out := make([]*pluginapi.Device, p.count)
	for i := range out {
		out[i] = &pluginapi.Device{ID: fmt.Sprintf("%s%d", p.kind.prefix, i), Health: pluginapi.Healthy}
	}
	return out
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the chips once; they never change health, so the stream stays open
// until the kubelet closes it.
func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices()}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

// Allocate gives each container its chips: the variable naming them (chip indices, in
// order) and a device node per chip.
func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		var chips []int
		for _, id := range c.DevicesIds {
			n, err := strconv.Atoi(strings.TrimPrefix(id, p.kind.prefix))
			if err != nil || n < 0 || n >= p.count {
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
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs:    map[string]string{p.kind.envVar: strings.Join(names, ",")},
			Devices: specs,
		})
		log.Printf("%s: allocated %s", p.resource, strings.Join(c.DevicesIds, ","))
	}
	return resp, nil
}

func (p *plugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// serve listens on the plugin's socket (replacing a stale one) and serves the API.
func (p *plugin) serve() error {
	_ = os.Remove(p.socket)
	ln, err := net.Listen("unix", p.socket)
	if err != nil {
		return err
	}
	p.server = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.server, p)
	go func() { _ = p.server.Serve(ln) }()
	return nil
}

func (p *plugin) stop() {
	if p.server != nil {
		p.server.Stop()
		p.server = nil
	}
	_ = os.Remove(p.socket)
}

// register tells the kubelet at kubeletSocket about this plugin's endpoint (a socket name
// in the same folder, as the API requires).
func (p *plugin) register(kubeletSocket string) error {
	conn, err := grpc.NewClient("unix://"+kubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: filepath.Base(p.socket), ResourceName: p.resource,
		Options: &pluginapi.DevicePluginOptions{}})
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
	flag.Var(&wanted, "resource", "NAME=COUNT, e.g. google.com/tpu=4 (repeatable)")
	flag.Parse()
	dir := filepath.Dir(*kubeletSocket)
	var plugins []*plugin
	for _, r := range wanted {
		name, count, ok := strings.Cut(r, "=")
		n, err := strconv.Atoi(count)
		k, known := kinds[name]
		if !ok || err != nil || n < 1 || !known {
			log.Fatalf("--resource %q: want NAME=COUNT with NAME one of google.com/tpu, nvidia.com/gpu", r)
		}
		sock := filepath.Join(dir, "xs-"+strings.NewReplacer("/", "-", ".", "-").Replace(name)+".sock")
		plugins = append(plugins, &plugin{resource: name, kind: k, count: n, socket: sock})
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
			p.stop()
			if err := p.serve(); err != nil {
				log.Printf("%s: serve %s: %v", p.resource, p.socket, err)
				continue
			}
			if err := p.register(*kubeletSocket); err != nil {
				log.Printf("%s: register with %s: %v", p.resource, *kubeletSocket, err)
				p.stop()
				continue
			}
			registered[p] = [2]uint64{inode(p.socket), kubelet}
			log.Printf("%s: %d devices registered with the kubelet (endpoint %s)", p.resource, p.count, p.socket)
		}
		select {
		case <-stop:
			for _, p := range plugins {
				p.stop()
			}
			return
		case <-tick.C:
		}
	}
}
