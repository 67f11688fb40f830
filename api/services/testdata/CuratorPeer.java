// A Curator ServiceDiscovery (curator-x-discovery, Debian's
// libcurator-discovery-java) driven line by line on stdin, for the interop
// test of the services recipe (curator_test.go). It answers one line per
// command on stdout:
//
//   register SERVICE ID ADDRESS PORT  -> "ok"     (payload {"from":"curator"}, uriSpec "{scheme}://{address}:{port}")
//   unregister SERVICE ID             -> "ok"
//   list SERVICE                      -> "list " + JSON [{"id","address","port","sslPort","enabled","payload","uriSpec"}] sorted by id
//
// and "error <exception>" when a command fails. It prints "ready" once its
// ServiceDiscovery has started.
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryNTimes;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.UriSpec;
import org.apache.curator.x.discovery.details.JsonInstanceSerializer;

public class CuratorPeer {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], 10000, 10000, new RetryNTimes(50, 200));
        client.start();
        client.blockUntilConnected();
        ServiceDiscovery<Object> discovery = ServiceDiscoveryBuilder.builder(Object.class)
                .client(client).basePath(args[1])
                .serializer(new JsonInstanceSerializer<>(Object.class)).build();
        discovery.start();
        ObjectMapper json = new ObjectMapper();
        Map<String, ServiceInstance<Object>> mine = new HashMap<>();
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.trim().split(" ");
            try {
                switch (f[0]) {
                    case "register": {
                        Map<String, Object> payload = new HashMap<>();
                        payload.put("from", "curator");
                        ServiceInstance<Object> i = ServiceInstance.builder().name(f[1]).id(f[2]).address(f[3])
                                .port(Integer.parseInt(f[4])).payload(payload)
                                .uriSpec(new UriSpec("{scheme}://{address}:{port}")).build();
                        discovery.registerService(i);
                        mine.put(f[1] + "/" + f[2], i);
                        System.out.println("ok");
                        break;
                    }
                    case "unregister": {
                        discovery.unregisterService(mine.remove(f[1] + "/" + f[2]));
                        System.out.println("ok");
                        break;
                    }
                    case "list": {
                        List<Map<String, Object>> out = new ArrayList<>();
                        for (ServiceInstance<Object> i : discovery.queryForInstances(f[1])) {
                            Map<String, Object> m = new LinkedHashMap<>();
                            m.put("id", i.getId());
                            m.put("address", i.getAddress());
                            m.put("port", i.getPort());
                            m.put("sslPort", i.getSslPort());
                            m.put("enabled", i.isEnabled());
                            m.put("payload", i.getPayload());
                            m.put("uriSpec", i.getUriSpec() == null ? null : i.buildUriSpec());
                            out.add(m);
                        }
                        out.sort(Comparator.comparing(m -> (String) m.get("id")));
                        System.out.println("list " + json.writeValueAsString(out));
                        break;
                    }
                    default:
                        System.out.println("error unknown command " + f[0]);
                }
            } catch (Exception e) {
                System.out.println("error " + e.toString().replace('\n', ' '));
            }
            System.out.flush();
        }
        discovery.close();
        client.close();
    }
}
