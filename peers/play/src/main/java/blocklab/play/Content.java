package blocklab.play;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.neo4j.driver.types.Node;
import play.libs.Json;

/**
 * One Content node, with the six properties blocklab's {@code Content} record serialises,
 * in the same order: {@code {"id":..,"name":..,"code":..,"mimeType":..,"contentType":..,"body":..}}.
 */
record Content(long id, String name, String code, String mimeType, String contentType, String body) {

    /** Reads the node's properties; a missing or mistyped one is a {@link GraphError#malformed}. */
    static Content from(Node node) {
        try {
            return new Content(
                    node.get("id").asLong(),
                    node.get("name").asString(),
                    node.get("code").asString(),
                    node.get("mimeType").asString(),
                    node.get("contentType").asString(),
                    node.get("body").asString());
        } catch (RuntimeException e) {
            throw GraphError.malformed(e);
        }
    }

    JsonNode toJson() {
        ObjectNode json = Json.newObject();
        json.put("id", id);
        json.put("name", name);
        json.put("code", code);
        json.put("mimeType", mimeType);
        json.put("contentType", contentType);
        json.put("body", body);
        return json;
    }
}
