package dev.meshlife.compat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.styra.opa.wasm.OpaPolicy;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;

/**
 * The Java OPA wasm SDK (com.styra.opa:opa-java-wasm, on the Chicory runtime) side of the
 * compatibility matrix.
 *
 * <pre>java -cp ... dev.meshlife.compat.JavaHost --module dist/meshlife.wasm --fixtures target/compat/fixtures.json</pre>
 *
 * <p>Prints {"columns": [...], "checks": [...]} (compat/src/external.rs) on stdout. One policy
 * instance serves every fixture of a column, as a service holding it would.
 */
public final class JavaHost {
  private static final String HOST = "Java opa-java-wasm (Chicory)";
  private static final String ENTRYPOINT = "meshlife/violation";
  private static final String INVENTORY = "{\"inventory\":{\"cluster\":{},\"namespace\":{}}}";
  private static final int MEMORY_ROUNDS = 10_000;
  private static final int MEMORY_WARM_UP = 1_000;
  private static final ObjectMapper JSON = new ObjectMapper();

  private record Fixture(String id, String group, byte[] bytes) {
    boolean absent() {
      return bytes == null;
    }
  }

  /** How one column hands the module a fixture. */
  private interface Evaluation {
    /** The result set's JSON; {@code sent} receives the bytes the SDK wrote, if not the fixture's. */
    String evaluate(OpaPolicy policy, Fixture fixture, String[] sent) throws Exception;
  }

  private record Way(String how, Supplier<OpaPolicy> load, Evaluation evaluation) {}

  public static void main(String[] arguments) throws Exception {
    Path module = null;
    Path index = null;
    for (int i = 0; i + 1 < arguments.length; i += 2) {
      switch (arguments[i]) {
        case "--module" -> module = Path.of(arguments[i + 1]);
        case "--fixtures" -> index = Path.of(arguments[i + 1]);
        default -> throw new IllegalArgumentException("unknown argument " + arguments[i]);
      }
    }
    if (module == null || index == null) {
      throw new IllegalArgumentException("usage: JavaHost --module M --fixtures F");
    }
    byte[] wasm = Files.readAllBytes(module);
    List<Fixture> fixtures = loadFixtures(index);
    String version = sdkVersion();

    // What the SDK last wrote as input. evaluate() without an argument writes no input: on an
    // instance that evaluated before, the module reads the previous input again (only a fresh
    // instance sends none). An absent fixture is judged on those bytes.
    String[] previousInput = {null};
    Evaluation asText = (policy, fixture, sent) -> {
      if (fixture.absent()) {
        sent[0] = previousInput[0];
        return policy.evaluate();
      }
      // The SDK takes a String and writes its getBytes(): what reaches the module is the
      // fixture decoded as UTF-8 and encoded again in the JVM's default charset.
      String text = new String(fixture.bytes(), StandardCharsets.UTF_8);
      byte[] written = text.getBytes();
      if (!Arrays.equals(written, fixture.bytes())) {
        sent[0] = new String(written, StandardCharsets.UTF_8);
      }
      previousInput[0] = new String(written, StandardCharsets.UTF_8);
      return policy.evaluate(text);
    };
    Evaluation asJsonNode = (policy, fixture, sent) -> {
      if (fixture.absent()) {
        sent[0] = previousInput[0];
        return policy.evaluate();
      }
      JsonNode node = JSON.readTree(fixture.bytes());
      String written = JSON.writeValueAsString(node);
      if (!Arrays.equals(written.getBytes(StandardCharsets.UTF_8), fixture.bytes())) {
        sent[0] = written;
      }
      previousInput[0] = written;
      return policy.evaluate(node);
    };
    List<Way> ways = List.of(
        new Way("evaluate(String), Chicory's compiler, no data", () -> load(wasm, null, true), asText),
        new Way("evaluate(String), Chicory's compiler, data(inventory)", () -> load(wasm, INVENTORY, true), asText),
        new Way("evaluate(String), Chicory's interpreter (disableCompiler)", () -> load(wasm, null, false), asText),
        new Way("evaluate(JsonNode), Jackson re-serialises the input", () -> load(wasm, null, true), asJsonNode));

    ArrayNode columns = JSON.createArrayNode();
    ArrayNode checks = JSON.createArrayNode();
    for (Way way : ways) {
      OpaPolicy policy = way.load().get();
      previousInput[0] = null;
      ObjectNode results = JSON.createObjectNode();
      for (Fixture fixture : fixtures) {
        results.set(fixture.id(), evaluateOne(policy, fixture, way.evaluation()));
      }
      ObjectNode column = columns.addObject();
      column.put("host", HOST);
      column.put("version", version);
      column.put("how", way.how());
      column.put("memory_capped", false);
      column.set("results", results);
      if (way.evaluation() == asText) {
        checks.add(memoryStability(way, policy, fixtures));
      }
    }
    ObjectNode output = JSON.createObjectNode();
    output.set("columns", columns);
    output.set("checks", checks);
    System.out.write(JSON.writeValueAsBytes(output));
    System.out.flush();
  }

  /** The SDK's version, from the pom.properties Maven packs into its jar. */
  private static String sdkVersion() throws IOException {
    var properties = new java.util.Properties();
    try (var stream = OpaPolicy.class.getResourceAsStream(
        "/META-INF/maven/com.styra.opa/opa-java-wasm/pom.properties")) {
      if (stream == null) {
        return "unknown";
      }
      properties.load(stream);
    }
    return "com.styra.opa:opa-java-wasm " + properties.getProperty("version", "unknown")
        + " (Java " + System.getProperty("java.version") + ")";
  }

  private static OpaPolicy load(byte[] wasm, String data, boolean compiled) {
    OpaPolicy.Builder builder = OpaPolicy.builder().withPolicy(wasm);
    if (!compiled) {
      builder = builder.disableCompiler();
    }
    OpaPolicy policy = builder.build().entrypoint(ENTRYPOINT);
    return data == null ? policy : policy.data(data);
  }

  private static List<Fixture> loadFixtures(Path index) throws IOException {
    List<Fixture> fixtures = new ArrayList<>();
    for (JsonNode entry : JSON.readTree(index.toFile())) {
      JsonNode file = entry.get("file");
      byte[] bytes = file == null || file.isNull()
          ? null
          : Files.readAllBytes(index.resolveSibling(file.asText()));
      fixtures.add(new Fixture(entry.get("id").asText(), entry.get("group").asText(), bytes));
    }
    return fixtures;
  }

  private static ObjectNode evaluateOne(OpaPolicy policy, Fixture fixture, Evaluation evaluation) {
    ObjectNode result = JSON.createObjectNode();
    String[] sent = new String[1];
    try {
      String resultSet = evaluation.evaluate(policy, fixture, sent);
      readResultSet(resultSet, result);
    } catch (Exception | StackOverflowError error) {
      result.removeAll();
      result.put("error", error.getClass().getSimpleName() + ": " + String.valueOf(error.getMessage()));
    }
    if (sent[0] != null) {
      result.put("sent", sent[0]);
    }
    return result;
  }

  /** The msg strings of a result set [{"result": [violation...]}]. */
  private static void readResultSet(String resultSet, ObjectNode result) throws IOException {
    JsonNode parsed = JSON.readTree(resultSet);
    if (!parsed.isArray() || parsed.size() != 1 || !parsed.get(0).path("result").isArray()) {
      result.put("error", "not a one-binding result set: " + abbreviate(resultSet));
      return;
    }
    ArrayNode msgs = result.putArray("msgs");
    for (JsonNode violation : parsed.get(0).get("result")) {
      JsonNode msg = violation.get("msg");
      if (msg == null || !msg.isTextual()) {
        result.removeAll();
        result.put("error", "a violation without a string msg: " + abbreviate(violation.toString()));
        return;
      }
      msgs.add(msg.asText());
    }
  }

  private static String abbreviate(String text) {
    return text.length() > 200 ? text.substring(0, 200) + "..." : text;
  }

  /**
   * A deny, an allow and an absent input in turn, 10,000 evaluations on one instance: the wasm
   * memory must not grow after the warm-up (the module resets its heap between evaluations).
   */
  private static ObjectNode memoryStability(Way way, OpaPolicy policy, List<Fixture> fixtures) throws Exception {
    ObjectNode check = JSON.createObjectNode();
    check.put("host", HOST);
    check.put("name", "memory stable (" + way.how() + ")");
    Fixture deny = null;
    Fixture allow = null;
    Fixture absent = null;
    for (Fixture fixture : fixtures) {
      if (deny == null && fixture.group().equals("examples") && !fixture.absent()
          && !JSON.readTree(policy.evaluate(new String(fixture.bytes(), StandardCharsets.UTF_8)))
              .get(0).get("result").isEmpty()) {
        deny = fixture;
      } else if (allow == null && fixture.group().equals("empty")) {
        allow = fixture;
      } else if (absent == null && fixture.absent()) {
        absent = fixture;
      }
    }
    if (deny == null || allow == null || absent == null) {
      check.put("ok", false);
      check.put("detail", "the fixtures hold no deny example, empty result or absent input");
      return check;
    }
    Fixture[] inputs = {deny, allow, absent};
    long atWarmUp = 0;
    long atEnd = 0;
    for (int round = 1; round <= MEMORY_ROUNDS; round++) {
      Fixture fixture = inputs[round % 3];
      String[] unused = new String[1];
      way.evaluation().evaluate(policy, fixture, unused);
      if (round == MEMORY_WARM_UP) {
        atWarmUp = memoryBytes(policy);
      } else if (round == MEMORY_ROUNDS) {
        atEnd = memoryBytes(policy);
      }
    }
    check.put("ok", atEnd == atWarmUp);
    check.put("detail", String.format(
        "%,d evaluations (%s, %s, %s in turn): wasm memory %,d bytes after %,d, %,d bytes after %,d",
        MEMORY_ROUNDS, deny.id(), allow.id(), absent.id(), atWarmUp, MEMORY_WARM_UP, atEnd, MEMORY_ROUNDS));
    return check;
  }

  /** The module's linear memory, read through the SDK's own instance (a field it keeps private). */
  private static long memoryBytes(OpaPolicy policy) throws ReflectiveOperationException {
    var wasmField = OpaPolicy.class.getDeclaredField("wasm");
    wasmField.setAccessible(true);
    Object wasm = wasmField.get(policy);
    Object memory = wasm.getClass().getMethod("memory").invoke(wasm);
    var pages = memory.getClass().getMethod("pages");
    pages.setAccessible(true);
    return ((Number) pages.invoke(memory)).longValue() * 65536L;
  }
}
