package redacturl

import "testing"

func TestURL(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"amqp://guest:hunter2@127.0.0.1:5672/vh", "amqp://guest:<secret>@127.0.0.1:5672/vh"},
		{"nats://s3cret@h:4222", "nats://<secret>@h:4222"},
		{"nats://alice:s3cret@h:4222", "nats://alice:<secret>@h:4222"},
		{"http://127.0.0.1:8787/replay?token=hidden", "http://127.0.0.1:8787/replay?<secret>"},
		{"https://u:p@hooks.example/x?a=1&b=2#frag", "https://u:<secret>@hooks.example/x?<secret>#frag"},
		{"amqp://127.0.0.1:5672/", "amqp://127.0.0.1:5672/"},
		{"amqp://guest:hunter2@[::1", Unparsable},
		{"nats://tok en@h:1\x7f", Unparsable},
		{"", ""},
	}
	for _, c := range cases {
		if got := URL(c.in); got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	in := "nats://h:1, tls://bob:s3cret@h2:2,nats://tok@h3:3"
	want := "nats://h:1,tls://bob:<secret>@h2:2,nats://<secret>@h3:3"
	if got := List(in); got != want {
		t.Fatalf("List(%q) = %q, want %q", in, got, want)
	}
}
