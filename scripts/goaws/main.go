// Command goaws runs the goaws SQS emulator (github.com/Admiral-Piett/goaws)
// on the host and port of its config file. goaws's own main listens on
// 0.0.0.0 whatever the config's Host says; this one binds where the
// config says (127.0.0.1 in scripts/services.d/goaws.sh), and otherwise
// does what goaws's main does.
//
//	goaws -config FILE [ENV]     (ENV defaults to Local)
package main

import (
	"flag"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/Admiral-Piett/goaws/app"
	"github.com/Admiral-Piett/goaws/app/conf"
	"github.com/Admiral-Piett/goaws/app/gosqs"
	"github.com/Admiral-Piett/goaws/app/router"
	log "github.com/sirupsen/logrus"
)

func main() {
	var filename string
	var debug bool
	flag.StringVar(&filename, "config", "", "config file location + name")
	flag.BoolVar(&debug, "debug", false, "debug log level (default Info)")
	flag.Parse()

	log.SetFormatter(&log.JSONFormatter{})
	log.SetOutput(os.Stdout)
	log.SetLevel(log.InfoLevel)
	if debug {
		log.SetLevel(log.DebugLevel)
	}
	env := "Local"
	if flag.NArg() > 0 {
		env = flag.Arg(0)
	}
	ports := conf.LoadYamlConfig(filename, env)
	if len(ports) != 1 {
		log.Fatalf("want one port (Port) in %s, got %d", filename, len(ports))
	}
	host := app.CurrentEnvironment.Host
	if host == "" {
		log.Fatalf("no Host in %s: refusing to listen on every interface", filename)
	}
	go gosqs.PeriodicTasks(time.Second, make(chan struct{}))
	addr := net.JoinHostPort(host, ports[0])
	log.Warnf("GoAws listening on: %s", addr)
	log.Fatal(http.ListenAndServe(addr, router.New()))
}
