package dev.taskzilla.neo4jlocal;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;

/**
 * Runs Neo4j Community in-process with a Bolt connector on 127.0.0.1.
 *
 * <p>Usage: {@code Main DATA_DIR PORT}. Without the environment variable {@code NEO4J_LOCAL_PASSWORD},
 * auth is off; with it, the server requires user {@code neo4j} with that password (what a production
 * server does). The password never comes on the command line: argv is visible to every user in
 * {@code ps} and Neo4j writes the JVM's command line ({@code sun.java.command}) to its debug.log; a
 * process's environment is readable by its owner only. Prints {@code READY bolt://127.0.0.1:PORT} on stdout once
 * the default database answers, then runs until stdin closes or the process gets SIGTERM, and shuts
 * the database down cleanly. Reading stdin means the server dies with its parent: when the test
 * process goes away, its end of the pipe closes and this server stops, so no orphan JVM is left.
 */
public final class Main {
    static final String PASSWORD_ENV = "NEO4J_LOCAL_PASSWORD";

    private Main() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: Main DATA_DIR PORT (the password, if any, in env NEO4J_LOCAL_PASSWORD)");
            System.exit(2);
        }
        Path dir = Path.of(args[0]).toAbsolutePath();
        int port = Integer.parseInt(args[1]);
        String fromEnv = System.getenv(PASSWORD_ENV);
        String password = fromEnv == null || fromEnv.isEmpty() ? null : fromEnv;
        Files.createDirectories(dir);

        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(dir)
                .setConfig(BoltConnector.enabled, true)
                .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", port))
                .setConfig(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED)
                .setConfig(HttpConnector.enabled, false)
                .setConfig(GraphDatabaseSettings.auth_enabled, password != null)
                // Bolt's network threads otherwise idle 5 s per group on shutdown (10 s per stop).
                .setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_quiet_period, 0)
                .build();

        CountDownLatch stop = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            dbms.shutdown();
            stop.countDown();
        }));

        if (password != null) {
            // Embedded calls bypass auth: set the initial password the way an operator would.
            dbms.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME).executeTransactionally(
                    "ALTER USER neo4j SET PASSWORD $pw CHANGE NOT REQUIRED", Map.of("pw", password));
        }
        // Touch the default database so READY means "answers queries", not just "port open".
        dbms.database(GraphDatabaseSettings.DEFAULT_DATABASE_NAME).executeTransactionally("RETURN 1");
        System.out.println("READY bolt://127.0.0.1:" + port);
        System.out.flush();

        Thread watcher = new Thread(() -> {
            try {
                while (System.in.read() != -1) {
                    // drain; EOF means the parent is gone
                }
            } catch (Exception ignored) {
                // treat a broken stdin like EOF
            }
            System.exit(0);
        });
        watcher.setDaemon(true);
        watcher.start();
        stop.await();
    }
}
