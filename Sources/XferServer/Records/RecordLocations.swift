import Foundation
import XferCore
import XferProtocol

/// Locations as the index keeps them, and NEAR and distance order as SQL: each point on the
/// unit sphere in fixed point, so that the distance test is arithmetic that both backends do
/// alike (SQLite here has no trigonometry). A great-circle distance is within `d` exactly when
/// the straight chord between the points is within `2 sin(d / 2R)`, and chords order as
/// distances do.
enum RecordLocations {
    /// The Earth's mean radius, in metres.
    static let earthRadius = 6_371_008.8
    /// Units of one coordinate: a step is 6.4 cm on the surface, and a sum of three squared
    /// differences stays far within 64 bits.
    static let scale = 100_000_000.0

    /// One indexed location of a record's field.
    struct Point: Hashable {
        var field: String
        var x: Int64
        var y: Int64
        var z: Int64
    }

    /// The point of `latitude` and `longitude` (degrees) on the unit sphere, in fixed point.
    static func point(_ location: RecordLocation, field: String = "") -> Point {
        let latitude = location.latitude * .pi / 180
        let longitude = location.longitude * .pi / 180
        let fixed = { (value: Double) in Int64((value * scale).rounded()) }
        return Point(
            field: field, x: fixed(cos(latitude) * cos(longitude)), y: fixed(cos(latitude) * sin(longitude)),
            z: fixed(sin(latitude)))
    }

    /// The chord (in fixed units) of a surface distance in metres; past half the Earth, its diameter.
    static func chord(metres: Double) -> Int64 {
        let angle = min(metres / earthRadius, .pi)
        return Int64((2 * sin(angle / 2) * scale).rounded(.up))
    }

    /// The location a JSON value holds.
    /// - Throws: `bad_request` naming `what` unless it has a latitude and a longitude in range.
    static func location(_ value: JSONValue, _ what: String) throws -> RecordLocation {
        guard case .object(let object) = value, let latitude = RecordRules.number(object["latitude"]),
            let longitude = RecordRules.number(object["longitude"])
        else { throw refusal(what) }
        return try checked(RecordLocation(latitude: latitude, longitude: longitude), what)
    }

    /// `location`, checked to be on the Earth.
    /// - Throws: `bad_request` naming `what` for a latitude or longitude out of range.
    static func checked(_ location: RecordLocation, _ what: String) throws -> RecordLocation {
        guard (-90...90).contains(location.latitude), (-180...180).contains(location.longitude) else {
            throw refusal(what)
        }
        return location
    }

    private static func refusal(_ what: String) -> XferError {
        XferError(.badRequest, "\(what) needs a latitude (-90 to 90) and a longitude (-180 to 180)")
    }

    /// The points a record's LOCATION and LOCATION_LIST fields put in the index.
    static func points(_ fields: [String: RecordField]) -> [Point] {
        var out: Set<Point> = []
        for (name, field) in fields where field.type == .location || field.type == .locationList {
            let items = RecordRules.items(field)
            for item in items {
                if let location = try? location(item, name) { out.insert(point(location, field: name)) }
            }
        }
        return Array(out)
    }

    /// The points of a record's fields as stored (their JSON): for records saved before their
    /// locations were indexed.
    static func points(stored text: String) -> [Point] {
        (try? RecordJSON.decode([String: RecordField].self, from: Array(text.utf8))).map(points) ?? []
    }

    /// The live records that may hold a location, for the migration that indexes them.
    static let storedWithLocations =
        #"SELECT id, zone_id, type, fields FROM records WHERE deleted = false AND fields LIKE '%"LOCATION%'"#
    static let insertPoint = "INSERT INTO record_locations (record_id, zone_id, type, field, x, y, z)"

    /// NEAR as a test of a point `l` of `record_locations`: of the field, within the filter's
    /// distance. Only the `z` band is an index walk; the box and then the chord are tested on
    /// what it finds.
    /// - Throws: `bad_request` without a location or a distance of 0 or more metres.
    static func near(_ filter: RecordFilter) throws -> (String, [SQLValue]) {
        let centre = point(try location(filter.fieldValue.value, "NEAR's fieldValue"))
        guard let metres = filter.distance, metres.isFinite, metres >= 0 else {
            throw XferError(.badRequest, "NEAR needs a distance in metres, 0 or more")
        }
        let chord = chord(metres: metres)
        var tests = ["l.field = ?"]
        var values: [SQLValue] = [.text(filter.fieldName)]
        for (axis, centre) in [("z", centre.z), ("x", centre.x), ("y", centre.y)] {
            tests.append("l.\(axis) BETWEEN ? AND ?")
            values += [.int(centre - chord), .int(centre + chord)]
        }
        let (distance, bound) = squaredDistance(from: centre)
        tests.append("\(distance) <= ?")
        values += bound + [.int(chord * chord)]
        return (tests.joined(separator: " AND "), values)
    }

    /// A sort key ordering records by the distance of the field's nearest point from `location`.
    static func sortKey(_ field: String, from location: RecordLocation) -> (expression: String, values: [SQLValue]) {
        let (distance, bound) = squaredDistance(from: point(location))
        return (
            "(SELECT MIN(\(distance)) FROM record_locations l WHERE l.record_id = r.id AND l.field = ?)",
            bound + [.text(field)]
        )
    }

    /// The squared chord from a point `l` to `centre`, in fixed units, and its bound values.
    private static func squaredDistance(from centre: Point) -> (String, [SQLValue]) {
        (
            "(l.x - ?) * (l.x - ?) + (l.y - ?) * (l.y - ?) + (l.z - ?) * (l.z - ?)",
            [centre.x, centre.x, centre.y, centre.y, centre.z, centre.z].map { .int($0) }
        )
    }
}
