import AppBundle
import AppdAPI
import AppdCLI

extension Output {
    static func fail(_ error: AppdError, json useJSON: Bool) {
        fail(APIError(error), json: useJSON)
    }
}
