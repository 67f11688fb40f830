// A Curator InterProcessMultiLock (curator-recipes, Debian's
// libcurator-recipes-java) driven line by line on stdin, for the multi-lock
// interop test (curator_test.go). Its locks are InterProcessMutexes under
// BASE/locks/NAME, the sidecar's lock layout. One line answered per command:
//
//   acquire NAMES MILLIS  -> "acquired" or "timeout"  (NAMES comma-separated)
//   release               -> "released"               (the last acquired)
//
// and "error <exception>" when a command fails. It prints "ready" once its
// client is connected.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMultiLock;
import org.apache.curator.retry.RetryNTimes;

public class CuratorMultiLock {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], 10000, 10000, new RetryNTimes(50, 200));
        client.start();
        client.blockUntilConnected();
        InterProcessMultiLock held = null;
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.trim().split(" ");
            try {
                switch (f[0]) {
                    case "acquire": {
                        List<String> paths = new ArrayList<>();
                        for (String name : f[1].split(",")) {
                            paths.add(args[1] + "/locks/" + name);
                        }
                        InterProcessMultiLock lock = new InterProcessMultiLock(client, paths);
                        if (lock.acquire(Long.parseLong(f[2]), TimeUnit.MILLISECONDS)) {
                            held = lock;
                            System.out.println("acquired");
                        } else {
                            System.out.println("timeout");
                        }
                        break;
                    }
                    case "release": {
                        held.release();
                        held = null;
                        System.out.println("released");
                        break;
                    }
                    default:
                        System.out.println("error unknown command " + f[0]);
                }
            } catch (Exception e) {
                System.out.println("error " + e);
            }
            System.out.flush();
        }
        client.close();
    }
}
